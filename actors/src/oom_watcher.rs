//! OomWatcherActor: kubelet's OOM watcher (`pkg/kubelet/oom/oom_watcher_linux.go`). Reads the
//! kernel's OOM kills from the kernel log and records a Node event for each system OOM — one
//! whose memory limit was the whole node's (cAdvisor's `VictimContainerName == "/"`): type
//! Warning, reason `SystemOOM`, message `System OOM encountered, victim process: <name>, pid:
//! <pid>` (or `System OOM encountered` when the log did not name the victim). Container OOM
//! kills are not reported here: they show in the pod status (Docker's `OOMKilled`) and as the
//! pod's `OOMKilled` event.
//!
//! | Message / trigger | From          | Effect                                                   |
//! |-------------------|---------------|----------------------------------------------------------|
//! | kmsg stream item  | reader thread | system OOM → Node event (API in cluster mode, the debug ring always); every OOM → checkpoint |
//! | GetActorState     | Supervisor    | debug snapshot (OOMs seen, malformed lines, source state) |
//! | Panic             | Supervisor    | test-only fault hook                                     |
//!
//! The kernel log is read by [`dockerlet_host::oom::follow`] on a thread of its own (it blocks
//! on `/dev/kmsg`), from the beginning of the ring buffer as cAdvisor reads it, skipping the
//! records up to the checkpoint `<root-dir>/oom_watcher/checkpoint` (the last handled OOM's
//! sequence number and time, of this boot), so a restarted agent does not report an OOM again.
//! No readable kernel log: one warning, and the agent carries on without the watcher.

use crate::error_chain;
use crate::inspect::Inspect;
use crate::registry::Link;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use dockerlet_host::oom::{follow, read_checkpoint, write_checkpoint, Checkpoint, KmsgEvent, OomInstance};
use dockerlet_messages::debug::{EventSubject, EventType, RecordEvent};
use dockerlet_messages::pleg::ContainerOomKilled;
use dockerlet_messages::ContainerId;
use futures::channel::mpsc;
use serde_json::json;

/// The event's reason (kubelet's `systemOOMEvent`).
pub const SYSTEM_OOM: &str = "SystemOOM";

/// Where the watcher reads and keeps its checkpoint.
#[derive(Debug, Clone)]
pub struct OomWatcherConfig {
    /// The kernel log: `/dev/kmsg`, or (tests) a file or FIFO of records in its format.
    pub kmsg_path: PathBuf,
    /// The checkpoint's directory, `<root-dir>/oom_watcher`.
    pub checkpoint_dir: PathBuf,
    /// The node the events are about.
    pub node_name: String,
}

/// What the reader thread sends.
#[derive(Debug)]
pub enum KmsgItem {
    /// An OOM or a malformed line.
    Read(KmsgEvent),
    /// The source cannot be read (or no longer): the error, with its causes.
    Failed(String),
}

/// The OOM watcher.
pub struct OomWatcherActor {
    /// Source and checkpoint.
    config: OomWatcherConfig,
    /// The Supervisor's recorder: the debug ring (also standalone).
    events: Link<RecordEvent>,
    /// Tells the reader thread to end when this instance stops (a re-created actor starts its own).
    stop: Arc<AtomicBool>,
    /// System OOMs reported.
    system_ooms: u64,
    /// OOMs inside a cgroup's limit (not reported here).
    container_ooms: u64,
    /// Lines that were not kmsg records (skipped; the first one logged as a warning).
    malformed: u64,
    /// Why the kernel log cannot be read, if it cannot.
    unavailable: Option<String>,
    /// The last OOM seen, for the debug page.
    last_oom: Option<String>,
    /// Where a container's OOM kill goes (the PLEG), when anywhere.
    container_ooms_to: Option<crate::registry::Link<ContainerOomKilled>>,
    /// Messages handled.
    handled: u64,
}

impl OomWatcherActor {
    /// A watcher reading `config.kmsg_path`, reporting to `events` (which writes the Node's
    /// event to the API in cluster mode).
    pub fn new(config: OomWatcherConfig, events: Link<RecordEvent>) -> Self {
        OomWatcherActor {
            config,
            events,
            stop: Arc::new(AtomicBool::new(false)),
            system_ooms: 0,
            container_ooms: 0,
            malformed: 0,
            unavailable: None,
            last_oom: None,
            container_ooms_to: None,
            handled: 0,
        }
    }

    /// Tell `pleg` of every OOM kill in a container's cgroup.
    pub fn with_container_ooms_to(mut self, pleg: crate::registry::Link<ContainerOomKilled>) -> Self {
        self.container_ooms_to = Some(pleg);
        self
    }

    /// Start the reader thread; its records come back as a stream.
    fn start_reader(&mut self, ctx: &mut Context<Self>) {
        let (tx, rx) = mpsc::unbounded();
        let (path, dir, stop) = (
            self.config.kmsg_path.clone(),
            self.config.checkpoint_dir.clone(),
            self.stop.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("kmsg-reader".to_string())
            .spawn(move || {
                let checkpoint = read_checkpoint(&dir);
                let result = follow(
                    &path,
                    checkpoint.as_ref(),
                    |event| tx.unbounded_send(KmsgItem::Read(event)).is_ok(),
                    || stop.load(Ordering::Relaxed) || tx.is_closed(),
                );
                if let Err(e) = result {
                    let _ = tx.unbounded_send(KmsgItem::Failed(error_chain(&e)));
                }
            });
        match spawned {
            Ok(_) => {
                ctx.add_stream(rx);
            }
            Err(e) => self.unavailable(format!("cannot start the kernel log reader: {e}")),
        }
    }

    /// The kernel log cannot be read: one warning, and no OOM watcher.
    fn unavailable(&mut self, error: String) {
        tracing::warn!(path = %self.config.kmsg_path.display(), error = %error, "no OOM watcher: system OOMs are not reported");
        self.unavailable = Some(error);
    }

    /// One OOM: a system OOM becomes a Node event; the checkpoint moves past it either way.
    fn oom(&mut self, oom: OomInstance, ctx: &mut Context<Self>) {
        self.last_oom = Some(format!("{oom:?}"));
        if oom.is_system_oom() {
            self.system_ooms += 1;
            let message = system_oom_message(&oom);
            tracing::info!(process = ?oom.process_name, pid = ?oom.pid, "system OOM");
            self.record(message);
        } else {
            self.container_ooms += 1;
            tracing::debug!(cgroup = %oom.victim_container_name, process = ?oom.process_name, "OOM within a cgroup limit");
            if let (Some(pleg), Some(id)) = (&self.container_ooms_to, container_of(&oom.container_name)) {
                pleg.do_send(ContainerOomKilled { id });
            }
        }
        let (dir, checkpoint) = (self.config.checkpoint_dir.clone(), Checkpoint::after(&oom));
        // The mailbox waits: checkpoints are written in order, one at a time (OOMs are rare).
        ctx.wait(
            async move {
                match tokio::task::spawn_blocking(move || write_checkpoint(&dir, &checkpoint)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(error = %error_chain(&e), "cannot write the OOM checkpoint"),
                    Err(e) => tracing::warn!(error = %e, "cannot write the OOM checkpoint"),
                }
            }
            .into_actor(self),
        );
    }

    /// The SystemOOM event: to the debug ring, and to the API about the Node in cluster mode.
    fn record(&self, message: String) {
        let about = EventSubject::Node(self.config.node_name.clone());
        self.events
            .do_send(RecordEvent::about(about, EventType::Warning, SYSTEM_OOM, message));
    }
}

impl Actor for OomWatcherActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.start_reader(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl StreamHandler<KmsgItem> for OomWatcherActor {
    fn handle(&mut self, item: KmsgItem, ctx: &mut Self::Context) {
        self.handled += 1;
        match item {
            KmsgItem::Read(KmsgEvent::Oom(oom)) => self.oom(oom, ctx),
            KmsgItem::Read(KmsgEvent::Malformed { line, reason }) => {
                self.malformed += 1;
                if self.malformed == 1 {
                    tracing::warn!(line = %line, reason = %reason, "skipping a malformed kernel log line (further ones at debug)");
                } else {
                    tracing::debug!(line = %line, reason = %reason, "skipping a malformed kernel log line");
                }
            }
            KmsgItem::Failed(error) => self.unavailable(error),
        }
    }

    /// The reader ended (the source failed): the actor stays, so the watchdog does not
    /// re-create it and warn again.
    fn finished(&mut self, _: &mut Self::Context) {}
}

impl Inspect for OomWatcherActor {
    const KIND: &'static str = "OomWatcherActor";
    const NAME: &'static str = "oom";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.unavailable.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "kmsg_path": self.config.kmsg_path,
            "system_ooms": self.system_ooms,
            "container_ooms": self.container_ooms,
            "malformed_lines": self.malformed,
            "last_oom": self.last_oom,
        })
    }
}

crate::supervised!(OomWatcherActor);

/// kubelet's message: the victim when the log named it.
pub fn system_oom_message(oom: &OomInstance) -> String {
    match (&oom.process_name, oom.pid) {
        (Some(name), Some(pid)) if !name.is_empty() && pid != 0 => {
            format!("System OOM encountered, victim process: {name}, pid: {pid}")
        }
        _ => "System OOM encountered".to_string(),
    }
}

/// The Docker container whose cgroup `path` is: its last component, `docker-<id>.scope` (the
/// systemd driver) or `<id>` (cgroupfs), a 64-hex-digit ID; none for any other cgroup.
fn container_of(path: &str) -> Option<ContainerId> {
    let last = path.rsplit('/').next()?;
    let id = last
        .strip_prefix("docker-")
        .and_then(|s| s.strip_suffix(".scope"))
        .unwrap_or(last);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| ContainerId(id.to_string()))
}

#[cfg(test)]
mod tests {
    use dockerlet_messages::debug::GetActorState;
    use std::time::Duration;

    use super::*;

    fn oom(victim: &str, process: Option<(&str, u32)>) -> OomInstance {
        OomInstance {
            pid: process.map(|p| p.1),
            process_name: process.map(|p| p.0.to_string()),
            container_name: victim.to_string(),
            victim_container_name: victim.to_string(),
            constraint: None,
            timestamp_us: 1,
            sequence: 1,
        }
    }

    /// kubelet's message names the victim when it is known, and only then.
    #[test]
    fn the_message_names_the_victim_when_known() {
        assert_eq!(
            system_oom_message(&oom("/", Some(("stress", 2318)))),
            "System OOM encountered, victim process: stress, pid: 2318"
        );
        assert_eq!(system_oom_message(&oom("/", None)), "System OOM encountered");
        assert_eq!(system_oom_message(&oom("/", Some(("x", 0)))), "System OOM encountered");
    }

    /// Collects the events the watcher records.
    struct Sink(Arc<std::sync::Mutex<Vec<dockerlet_messages::debug::DebugEvent>>>);

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<RecordEvent> for Sink {
        type Result = ();
        fn handle(&mut self, msg: RecordEvent, _: &mut Context<Self>) {
            self.0.lock().unwrap().push(msg.to_debug());
        }
    }

    /// A system OOM in a tailed file gives one SystemOOM event about the node; a container's
    /// OOM and malformed lines none; a re-started watcher on the same checkpoint none again.
    #[actix::test]
    async fn a_system_oom_is_one_node_event_and_not_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let kmsg = dir.path().join("kmsg");
        let log = "not a record\n\
                   4,10,100,-;dd invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n\
                   6,11,101,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=a,mems_allowed=0,oom_memcg=/docker/a,task_memcg=/docker/a,task=dd,pid=5,uid=0\n\
                   4,12,200,-;stress invoked oom-killer: gfp_mask=0x0, order=0, oom_score_adj=0\n\
                   6,13,201,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=stress,pid=77,uid=0\n";
        tokio::fs::write(&kmsg, log).await.unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let config = OomWatcherConfig {
            kmsg_path: kmsg,
            checkpoint_dir: dir.path().join("oom_watcher"),
            node_name: "n1".to_string(),
        };
        let sink = Sink(seen.clone()).start();
        let watcher = OomWatcherActor::new(config.clone(), sink.clone().recipient().into()).start();
        let mut tries = 0;
        while seen.lock().unwrap().is_empty() && tries < 100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tries += 1;
        }
        let state = watcher.send(GetActorState).await.unwrap();
        assert_eq!(state.detail["system_ooms"], 1);
        assert_eq!(state.detail["container_ooms"], 1);
        assert_eq!(state.detail["malformed_lines"], 1);
        {
            let events = seen.lock().unwrap();
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0].reason, SYSTEM_OOM);
            assert_eq!(events[0].object, "node/n1");
            assert_eq!(
                events[0].message,
                "System OOM encountered, victim process: stress, pid: 77"
            );
        }
        let mut tries = 0;
        while read_checkpoint(&config.checkpoint_dir).map(|c| c.sequence) != Some(13) && tries < 100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tries += 1;
        }
        assert_eq!(read_checkpoint(&config.checkpoint_dir).map(|c| c.sequence), Some(13));
        let again = OomWatcherActor::new(config, sink.recipient().into()).start();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let state = again.send(GetActorState).await.unwrap();
        assert_eq!(state.detail["system_ooms"], 0, "{}", state.detail);
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    /// No kernel log: the watcher says why and stays up.
    #[actix::test]
    async fn no_kernel_log_is_a_warning_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let config = OomWatcherConfig {
            kmsg_path: dir.path().join("absent"),
            checkpoint_dir: dir.path().join("oom_watcher"),
            node_name: "n1".to_string(),
        };
        let sink = Sink(Arc::default()).start();
        let watcher = OomWatcherActor::new(config, sink.recipient().into()).start();
        let mut state = watcher.send(GetActorState).await.unwrap();
        for _ in 0..100 {
            if state.last_error.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            state = watcher.send(GetActorState).await.unwrap();
        }
        assert!(
            state.last_error.as_deref().unwrap_or_default().contains("absent"),
            "{state:?}"
        );
        assert!(watcher.connected());
    }

    /// The container of an OOM kill's cgroup: a systemd scope or a cgroupfs directory named by
    /// its 64-digit ID; pod, QoS and system cgroups are none.
    #[test]
    fn the_container_of_an_oom_cgroup() {
        let id = "2a93871431cf".repeat(5) + "abcd";
        assert_eq!(id.len(), 64);
        let want = Some(ContainerId(id.clone()));
        assert_eq!(
            container_of(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc.slice/docker-{id}.scope"
            )),
            want
        );
        assert_eq!(container_of(&format!("/kubepods/burstable/podabc/{id}")), want);
        assert_eq!(container_of("/kubepods/burstable/podabc"), None);
        assert_eq!(container_of("/system.slice/docker.service"), None);
        assert_eq!(container_of("/"), None);
    }
}
