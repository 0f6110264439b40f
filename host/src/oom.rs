//! Kernel OOM kills from the kernel log (`/dev/kmsg`), as cAdvisor's `utils/oomparser` finds
//! them for kubelet's OOM watcher: a record containing `invoked oom-killer:` begins an OOM; the
//! one-line summary `oom-kill:constraint=…,oom_memcg=…|global_oom,task_memcg=…,task=…,pid=…,uid=…`
//! (kernels ≥ 4.19) or, on older kernels, `Task in <cgroup> killed as a result of limit of
//! <cgroup>` followed by `Killed process <pid> (<name>)` completes it.
//!
//! [`parse_record`] reads one `/dev/kmsg` record (`priority,sequence,microseconds,flags;message`),
//! [`OomParser`] turns records into [`OomInstance`]s, [`follow`] reads a kmsg source from its
//! beginning on a blocking thread — `/dev/kmsg` itself, or a regular file or FIFO in the same
//! format, which it tails — skipping what a [`Checkpoint`] says was already handled.
//! Malformed lines are reported, never fatal.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a tailed source that reached its end waits before reading again.
const TAIL_POLL: Duration = Duration::from_millis(100);
/// The checkpoint's file name under its directory.
const CHECKPOINT_FILE: &str = "checkpoint";
/// Where the kernel names this boot (sequence numbers restart at every boot).
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// A kernel log source or a checkpoint could not be used.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    /// The kmsg source cannot be opened (absent, or not readable without CAP_SYSLOG); not retried.
    #[error("cannot open the kernel log {path}")]
    OpenFailed {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading the kmsg source failed; not retried (the watcher stops reporting).
    #[error("cannot read the kernel log {path}")]
    ReadFailed {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint cannot be written; retried at the next OOM.
    #[error("cannot write the OOM checkpoint {path}")]
    CheckpointFailed {
        /// The checkpoint file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One `/dev/kmsg` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord {
    /// Syslog facility × 8 + level.
    pub priority: u32,
    /// The kernel's sequence number (per boot).
    pub sequence: u64,
    /// Microseconds since boot (monotonic clock).
    pub timestamp_us: u64,
    /// The message text.
    pub message: String,
}

/// Why a line is not a kmsg record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// No `;` between the header and the message.
    #[error("no ';' after the record header")]
    NoHeader,
    /// A header field is missing or not a number.
    #[error("header field {field} is missing or not a number")]
    BadField {
        /// `priority`, `sequence` or `timestamp`.
        field: &'static str,
    },
}

/// Parse one record: `priority,sequence,timestamp_us,flags[,…];message` (the kernel's
/// `Documentation/ABI/testing/dev-kmsg`). Continuation lines (` KEY=value`) are not records:
/// callers skip lines starting with a space.
pub fn parse_record(line: &str) -> Result<KmsgRecord, RecordError> {
    let line = line.trim_end_matches(['\n', '\r']);
    let (header, message) = line.split_once(';').ok_or(RecordError::NoHeader)?;
    let mut fields = header.split(',');
    let mut number = |field: &'static str| {
        fields
            .next()
            .and_then(|f| f.trim().parse::<u64>().ok())
            .ok_or(RecordError::BadField { field })
    };
    let priority = number("priority")?;
    let sequence = number("sequence")?;
    let timestamp_us = number("timestamp")?;
    Ok(KmsgRecord {
        priority: u32::try_from(priority).map_err(|_| RecordError::BadField { field: "priority" })?,
        sequence,
        timestamp_us,
        message: message.to_string(),
    })
}

/// One OOM kill (cAdvisor's `OomInstance`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomInstance {
    /// The killed process, if the log named it.
    pub pid: Option<u32>,
    /// Its command name, if the log named it.
    pub process_name: Option<String>,
    /// The cgroup of the killed task (`task_memcg`; `/` when the log says none).
    pub container_name: String,
    /// The cgroup whose limit was hit (`oom_memcg`); `/` for a global OOM: the whole node ran
    /// out of memory. kubelet reports `SystemOOM` when this is `/`.
    pub victim_container_name: String,
    /// `CONSTRAINT_NONE`, `CONSTRAINT_MEMCG`, … (newer kernels only).
    pub constraint: Option<String>,
    /// Microseconds since boot of the record that completed it.
    pub timestamp_us: u64,
    /// Sequence number of the record that completed it (the checkpoint).
    pub sequence: u64,
}

impl OomInstance {
    /// The whole node ran out of memory (kubelet's `VictimContainerName == "/"`).
    pub fn is_system_oom(&self) -> bool {
        self.victim_container_name == "/"
    }
}

/// Turns records into OOM kills, one record at a time.
#[derive(Debug, Default)]
pub struct OomParser {
    /// The OOM being read: its `invoked oom-killer:` record came, its victim not yet.
    current: Option<OomInstance>,
}

impl OomParser {
    /// Feed one record; an OOM that it completes, if any. A new `invoked oom-killer:` while one
    /// is incomplete gives the incomplete one (without a victim) and starts the next.
    pub fn feed(&mut self, record: &KmsgRecord) -> Option<OomInstance> {
        let message = record.message.as_str();
        if message.contains("invoked oom-killer:") {
            let previous = self.current.take();
            self.current = Some(OomInstance {
                pid: None,
                process_name: None,
                container_name: "/".to_string(),
                victim_container_name: "/".to_string(),
                constraint: None,
                timestamp_us: record.timestamp_us,
                sequence: record.sequence,
            });
            return previous;
        }
        let current = self.current.as_mut()?;
        let finished = summary_line(message, current) || {
            legacy_cgroups(message, current);
            killed_process(message, current)
        };
        if !finished {
            return None;
        }
        let mut done = self.current.take()?;
        done.timestamp_us = record.timestamp_us;
        done.sequence = record.sequence;
        Some(done)
    }
}

/// `oom-kill:constraint=C,nodemask=…,cpuset=…,mems_allowed=…,(oom_memcg=M|global_oom),task_memcg=T,task=N,pid=P,uid=U`.
/// Fields are cut from the right (a cpuset or mems_allowed may hold commas). True if the line
/// named the victim.
fn summary_line(message: &str, oom: &mut OomInstance) -> bool {
    let Some(start) = message.find("oom-kill:") else {
        return false;
    };
    let rest = &message[start + "oom-kill:".len()..];
    let Some((rest, _uid)) = rest.rsplit_once(",uid=") else {
        return false;
    };
    let Some((rest, pid)) = rest.rsplit_once(",pid=") else {
        return false;
    };
    let Some((rest, task)) = rest.rsplit_once(",task=") else {
        return false;
    };
    let Some((rest, task_memcg)) = rest.rsplit_once(",task_memcg=") else {
        return false;
    };
    let Ok(pid) = pid.trim().parse::<u32>() else {
        return false;
    };
    let victim = rest.rsplit_once(",oom_memcg=").map_or("/", |(_, memcg)| memcg);
    oom.constraint = rest
        .strip_prefix("constraint=")
        .map(|c| c.split(',').next().unwrap_or(c).to_string());
    oom.container_name = cgroup_name(task_memcg);
    oom.victim_container_name = cgroup_name(victim);
    oom.pid = Some(pid);
    oom.process_name = Some(task.to_string());
    true
}

/// Older kernels: `Task in /a killed as a result of limit of /b`.
fn legacy_cgroups(message: &str, oom: &mut OomInstance) {
    let Some(start) = message.find("Task in ") else {
        return;
    };
    let Some((task, limit)) = message[start + "Task in ".len()..].split_once(" killed as a result of limit of ") else {
        return;
    };
    oom.container_name = cgroup_name(task);
    oom.victim_container_name = cgroup_name(limit.trim());
}

/// `Killed process <pid> (<name>)`, also as `Out of memory: Killed process …` or
/// `Memory cgroup out of memory: Killed process …`. True if the line named the victim.
fn killed_process(message: &str, oom: &mut OomInstance) -> bool {
    let Some(start) = message.find("Killed process ") else {
        return false;
    };
    let rest = &message[start + "Killed process ".len()..];
    let Some((pid, rest)) = rest.split_once(" (") else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    // The name may hold parentheses: it ends at the last `)`.
    let Some(name) = rest.rfind(')').map(|end| &rest[..end]) else {
        return false;
    };
    oom.pid = Some(pid);
    oom.process_name = Some(name.to_string());
    true
}

/// An absolute cgroup name (`path.Join("/", name)`): never empty, no trailing slash.
fn cgroup_name(name: &str) -> String {
    let trimmed = name.trim().trim_matches('/');
    format!("/{trimmed}")
}

/// The last OOM handled: records up to it are skipped after a restart (of this boot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The boot it belongs to (`/proc/sys/kernel/random/boot_id`; empty if unknown).
    pub boot_id: String,
    /// The last handled record's sequence number.
    pub sequence: u64,
    /// Its timestamp, microseconds since boot.
    pub timestamp_us: u64,
}

impl Checkpoint {
    /// A checkpoint at `oom`'s last record, in this boot.
    pub fn after(oom: &OomInstance) -> Self {
        Checkpoint {
            boot_id: boot_id(),
            sequence: oom.sequence,
            timestamp_us: oom.timestamp_us,
        }
    }

    /// The file's text: one `key=value` line each.
    pub fn render(&self) -> String {
        format!(
            "boot_id={}\nsequence={}\ntimestamp_us={}\n",
            self.boot_id, self.sequence, self.timestamp_us
        )
    }

    /// The checkpoint a file's text holds; none unless all three keys are there and the numbers
    /// parse.
    pub fn parse(text: &str) -> Option<Self> {
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .map(str::trim)
        };
        Some(Checkpoint {
            boot_id: value("boot_id")?.to_string(),
            sequence: value("sequence")?.parse().ok()?,
            timestamp_us: value("timestamp_us")?.parse().ok()?,
        })
    }

    /// Whether `record` was already handled: same boot, sequence not after the checkpoint's.
    fn covers(&self, record: &KmsgRecord) -> bool {
        record.sequence <= self.sequence
    }
}

/// This boot's ID, or empty if the kernel does not say.
fn boot_id() -> String {
    std::fs::read_to_string(BOOT_ID)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The checkpoint in `dir`, if there is one for this boot (a missing, unreadable or
/// malformed file, or one of another boot, is none: everything is read again).
pub fn read_checkpoint(dir: &Path) -> Option<Checkpoint> {
    let text = std::fs::read_to_string(dir.join(CHECKPOINT_FILE)).ok()?;
    Checkpoint::parse(&text).filter(|c| c.boot_id == boot_id())
}

/// Write the checkpoint to `dir` atomically (a temporary file renamed over the old one).
pub fn write_checkpoint(dir: &Path, checkpoint: &Checkpoint) -> Result<(), OomError> {
    let path = dir.join(CHECKPOINT_FILE);
    let failed = |source| OomError::CheckpointFailed {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let temporary = dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
    {
        let mut file = File::create(&temporary).map_err(failed)?;
        std::io::Write::write_all(&mut file, checkpoint.render().as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
    }
    std::fs::rename(&temporary, &path).map_err(failed)
}

/// What [`follow`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KmsgEvent {
    /// An OOM kill after the checkpoint.
    Oom(OomInstance),
    /// A line that is not a kmsg record (skipped).
    Malformed {
        /// The line, cut to 200 bytes.
        line: String,
        /// Why.
        reason: RecordError,
    },
}

/// Read the kmsg source at `path` from its beginning (as cAdvisor does), skipping records
/// `checkpoint` covers, and hand every OOM and malformed line to `send`, until `send` returns
/// false or `stop` says so. Blocks: run it on its own thread. At the end of a regular file or
/// FIFO it waits for more (tails it); `/dev/kmsg` blocks by itself, and records overwritten
/// before they were read (`EPIPE`) are skipped.
pub fn follow(
    path: &Path,
    checkpoint: Option<&Checkpoint>,
    mut send: impl FnMut(KmsgEvent) -> bool,
    stop: impl Fn() -> bool,
) -> Result<(), OomError> {
    let file = File::open(path).map_err(|source| OomError::OpenFailed {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::with_capacity(16 * 1024, file);
    let mut parser = OomParser::default();
    let mut line = Vec::new();
    while !stop() {
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => std::thread::sleep(TAIL_POLL),
            // A partial last line of a file being written: wait for the rest.
            Ok(_) if !line.ends_with(b"\n") => {}
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                if let Some(event) = handle_line(&text, checkpoint, &mut parser) {
                    if !send(event) {
                        return Ok(());
                    }
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::BrokenPipe) => line.clear(),
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TAIL_POLL),
            Err(source) => {
                return Err(OomError::ReadFailed {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// One line of the source: a record for the parser, a continuation to skip, or malformed.
fn handle_line(text: &str, checkpoint: Option<&Checkpoint>, parser: &mut OomParser) -> Option<KmsgEvent> {
    if text.starts_with(' ') || text.trim().is_empty() {
        return None;
    }
    match parse_record(text) {
        Ok(record) if checkpoint.is_some_and(|c| c.covers(&record)) => None,
        Ok(record) => parser.feed(&record).map(KmsgEvent::Oom),
        Err(reason) => {
            let mut end = text.trim_end().len().min(200);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Some(KmsgEvent::Malformed {
                line: text[..end].to_string(),
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every OOM of a kernel log excerpt (one record a line).
    fn ooms(log: &str) -> Vec<OomInstance> {
        let mut parser = OomParser::default();
        log.lines()
            .filter_map(|l| handle_line(l, None, &mut parser))
            .filter_map(|e| match e {
                KmsgEvent::Oom(o) => Some(o),
                KmsgEvent::Malformed { .. } => None,
            })
            .collect()
    }

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kmsg").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A record's header fields and message are read; flags and extra header fields ignored.
    #[test]
    fn a_record_is_priority_sequence_timestamp_and_message() {
        let r = parse_record("6,159153,39305010312,-;veth4222220: entered promiscuous mode\n").unwrap();
        assert_eq!(
            r,
            KmsgRecord {
                priority: 6,
                sequence: 159153,
                timestamp_us: 39305010312,
                message: "veth4222220: entered promiscuous mode".to_string(),
            }
        );
        let r = parse_record("4,12,34,c,caller=T1;a; message; with semicolons").unwrap();
        assert_eq!(r.message, "a; message; with semicolons");
    }

    /// Lines that are not records are errors naming what is wrong, never a panic.
    #[test]
    fn malformed_records_are_errors() {
        assert_eq!(parse_record("no header at all"), Err(RecordError::NoHeader));
        assert_eq!(
            parse_record("x,1,2,-;msg"),
            Err(RecordError::BadField { field: "priority" })
        );
        assert_eq!(
            parse_record("6,,2,-;msg"),
            Err(RecordError::BadField { field: "sequence" })
        );
        assert_eq!(
            parse_record("6,1;msg"),
            Err(RecordError::BadField { field: "timestamp" })
        );
        assert_eq!(
            parse_record("99999999999,1,2,-;msg"),
            Err(RecordError::BadField { field: "priority" })
        );
        assert_eq!(parse_record(""), Err(RecordError::NoHeader));
        assert_eq!(
            parse_record("6,1,-5,-;msg"),
            Err(RecordError::BadField { field: "timestamp" })
        );
    }

    /// Linux 6.18 (this project's CI host, cgroup v1): a container over its memory limit.
    /// The limit hit is the container's cgroup: not a system OOM.
    #[test]
    fn a_memcg_oom_on_linux_6_names_the_container_cgroup() {
        let found = ooms(&fixture("linux-6.18-memcg.kmsg"));
        assert_eq!(found.len(), 1, "{found:?}");
        let oom = &found[0];
        assert_eq!(oom.process_name.as_deref(), Some("dd"));
        assert!(oom.pid.is_some());
        assert_eq!(oom.constraint.as_deref(), Some("CONSTRAINT_MEMCG"));
        assert!(
            oom.container_name.starts_with("/docker/") || oom.container_name.starts_with("/kubepods"),
            "{oom:?}"
        );
        assert!(!oom.is_system_oom(), "{oom:?}");
    }

    /// Linux 5.15 (Ubuntu 22.04): a global OOM prints `global_oom` instead of `oom_memcg=`:
    /// a system OOM, with the victim from the summary line.
    #[test]
    fn a_global_oom_on_linux_5_is_a_system_oom() {
        let found = ooms(&fixture("linux-5.15-global.kmsg"));
        assert_eq!(found.len(), 1, "{found:?}");
        let oom = &found[0];
        assert!(oom.is_system_oom());
        assert_eq!(oom.pid, Some(2318));
        assert_eq!(oom.process_name.as_deref(), Some("stress"));
        assert_eq!(oom.container_name, "/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(oom.constraint.as_deref(), Some("CONSTRAINT_NONE"));
        assert_eq!(oom.sequence, 1207, "the summary line completes it");
    }

    /// Linux 5.4 (kubepods on cgroup v1): a container OOM in a pod's cgroup, the victim cgroup
    /// from task_memcg, the limit from oom_memcg.
    #[test]
    fn a_pod_oom_on_linux_5_4_names_both_cgroups() {
        let found = ooms(&fixture("linux-5.4-kubepods.kmsg"));
        assert_eq!(found.len(), 1, "{found:?}");
        let oom = &found[0];
        assert_eq!(
            oom.victim_container_name,
            "/kubepods/burstable/pod7b5e1c2c-58f2-4f6c-9e57-8d0ab1c64f0e"
        );
        assert_eq!(
            oom.container_name,
            "/kubepods/burstable/pod7b5e1c2c-58f2-4f6c-9e57-8d0ab1c64f0e/3f0c9e9f2b0a4d6c8e1f7a5b9c2d4e6f8a0b1c3d5e7f9a1b3c5d7e9f1a3b5c7d"
        );
        assert_eq!(oom.pid, Some(31337));
        assert_eq!(oom.process_name.as_deref(), Some("python3"));
        assert!(!oom.is_system_oom());
    }

    /// Linux 4.14 (before the summary line): a memcg OOM from `Task in … killed as a result of
    /// limit of …`, then a global one with only `Killed process` — a system OOM.
    #[test]
    fn old_kernels_name_cgroups_in_task_in_and_the_victim_in_killed_process() {
        let found = ooms(&fixture("linux-4.14-legacy.kmsg"));
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].container_name, "/docker/4c1d3e8b1a2f");
        assert_eq!(found[0].victim_container_name, "/docker/4c1d3e8b1a2f");
        assert_eq!(found[0].pid, Some(4521));
        assert_eq!(found[0].process_name.as_deref(), Some("java"));
        assert!(!found[0].is_system_oom());
        assert!(found[1].is_system_oom());
        assert_eq!(found[1].pid, Some(812));
        assert_eq!(found[1].process_name.as_deref(), Some("memhog (worker)"));
        assert_eq!(found[1].constraint, None);
    }

    /// Malformed lines inside and around an OOM are reported and skipped; the OOM still parses.
    #[test]
    fn malformed_lines_are_skipped_and_reported() {
        let log = "garbage\n6,1,100,-;dd invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n \
                   SUBSYSTEM=memory\n\u{fffd}\u{fffd};\n6,x,y;half\n3,2,200,-;Out of memory: Killed process 77 (dd) total-vm:1kB\n";
        let mut parser = OomParser::default();
        let events: Vec<KmsgEvent> = log.lines().filter_map(|l| handle_line(l, None, &mut parser)).collect();
        let malformed = events
            .iter()
            .filter(|e| matches!(e, KmsgEvent::Malformed { .. }))
            .count();
        assert_eq!(malformed, 3, "{events:?}");
        let oom: Vec<&OomInstance> = events
            .iter()
            .filter_map(|e| match e {
                KmsgEvent::Oom(o) => Some(o),
                _ => None,
            })
            .collect();
        assert_eq!(oom.len(), 1);
        assert_eq!((oom[0].pid, oom[0].process_name.as_deref()), (Some(77), Some("dd")));
        assert!(oom[0].is_system_oom());
    }

    /// A summary line with a garbled pid does not complete the OOM; the `Killed process` line does.
    #[test]
    fn a_garbled_summary_line_falls_back_to_killed_process() {
        let log = "4,1,1,-;a invoked oom-killer: gfp_mask=0x0\n\
                   6,2,2,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=a,pid=zz,uid=0\n\
                   3,3,3,-;Out of memory: Killed process 9 (a) total-vm:1kB\n";
        let found = ooms(log);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pid, Some(9));
        assert_eq!(found[0].sequence, 3);
    }

    /// An OOM without a victim line, cut off by the next one, is still reported (without process).
    #[test]
    fn an_oom_cut_off_by_the_next_is_reported_without_a_victim() {
        let log = "4,1,1,-;a invoked oom-killer: gfp_mask=0x0\n4,2,2,-;b invoked oom-killer: gfp_mask=0x0\n\
                   3,3,3,-;Out of memory: Killed process 9 (b)\n";
        let found = ooms(log);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].pid, found[0].process_name.clone()), (None, None));
        assert_eq!(found[1].process_name.as_deref(), Some("b"));
    }

    /// The checkpoint round-trips, and records up to it are skipped on the next read.
    #[test]
    fn the_checkpoint_skips_records_already_handled() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_checkpoint(dir.path()), None);
        let log_path = dir.path().join("kmsg");
        std::fs::write(&log_path, fixture("linux-4.14-legacy.kmsg")).unwrap();
        let read_all = |checkpoint: Option<&Checkpoint>| {
            let mut found = Vec::new();
            // A regular file is tailed: stop once nothing more came for a while.
            let idle = std::cell::Cell::new(0u32);
            follow(
                &log_path,
                checkpoint,
                |e| {
                    idle.set(0);
                    found.push(e);
                    true
                },
                || {
                    idle.set(idle.get() + 1);
                    idle.get() > 40
                },
            )
            .unwrap();
            found
        };
        let first = read_all(None);
        let KmsgEvent::Oom(oom) = &first[0] else {
            panic!("{first:?}")
        };
        write_checkpoint(dir.path().join("oom_watcher").as_path(), &Checkpoint::after(oom)).unwrap();
        let checkpoint = read_checkpoint(&dir.path().join("oom_watcher")).expect("checkpoint");
        assert_eq!(checkpoint.sequence, oom.sequence);
        let again = read_all(Some(&checkpoint));
        assert_eq!(
            again.len(),
            first.len() - 1,
            "the first OOM is not read again: {again:?}"
        );
        assert_eq!(again[0], first[1]);
    }

    /// A checkpoint of another boot does not apply; a malformed one is ignored.
    #[test]
    fn a_checkpoint_of_another_boot_or_malformed_is_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CHECKPOINT_FILE),
            "boot_id=not-this-boot\nsequence=5\ntimestamp_us=6\n",
        )
        .unwrap();
        if !boot_id().is_empty() {
            assert_eq!(read_checkpoint(dir.path()), None);
        }
        std::fs::write(dir.path().join(CHECKPOINT_FILE), "sequence=five\n").unwrap();
        assert_eq!(read_checkpoint(dir.path()), None);
    }

    /// A missing source is an OpenFailed error naming it.
    #[test]
    fn a_missing_source_is_an_open_error() {
        let err = follow(Path::new("/nonexistent/kmsg"), None, |_| true, || false).unwrap_err();
        assert!(matches!(err, OomError::OpenFailed { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/kmsg"));
    }
}
