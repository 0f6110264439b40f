//! `--root-dir`'s file system full: the agent's root dir is a 32 MiB tmpfs that the scenario
//! fills up while pods run, then adds pods (their `/etc/hosts`, volume and log directories are
//! written there) and deletes one. The agent keeps running, says which file could not be
//! written and why, disturbs no running pod, leaves no state file half-written, and once there
//! is room again starts the new pods; a restart then adopts everything.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::agent_faults::{hold_unchanged, start_timeout};
use super::node::{describe, difference, ChaosNode};
use super::{ChaosSettings, Outcome};
use crate::scenarios::Ctx;

const SIZE: &str = "32m";
const PODS: usize = 5;
const NEW_PODS: usize = 2;

/// A tmpfs mounted for the scenario; unmounted (lazily) when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("dockerlet-chaos-disk-")
            .tempdir()
            .context("a temporary directory")?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={SIZE}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .context("run mount")?;
        if !status.success() {
            bail!(
                "cannot mount a tmpfs on {} ({status}): the scenario needs root",
                dir.path().display()
            );
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// A pod with an emptyDir it writes into.
fn pod_with_volume(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: main
      image: dockerlet.local/busybox:1
      command: [\"sh\", \"-c\", \"echo hello > /data/f; trap 'exit 0' TERM; sleep 3600 & wait\"]
      volumeMounts: [{{name: data, mountPath: /data}}]
  volumes: [{{name: data, emptyDir: {{}}}}]
"
    )
}

/// Writes `path` until the file system is full; the bytes written.
fn fill(path: &Path) -> anyhow::Result<u64> {
    let mut file = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let chunk = vec![0u8; 1 << 20];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) => break,
            Err(e) => return Err(e).with_context(|| format!("write {}", path.display())),
        }
    }
    // The last partial blocks too.
    let small = [0u8; 4096];
    while file.write(&small).is_ok_and(|n| n > 0) {
        written += 4096;
    }
    Ok(written)
}

/// Every `*.json` file under `dir` that does not parse.
fn corrupt_json(dir: &Path) -> Vec<PathBuf> {
    let mut bad = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() && p.extension().is_some_and(|x| x == "json") {
                let ok = std::fs::read(&p)
                    .ok()
                    .is_some_and(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok());
                if !ok {
                    bad.push(p);
                }
            }
        }
    }
    bad
}

/// `cat /etc/hosts` in the app container of the static pod `name`: names the pod.
fn hosts_names_pod(node: &ChaosNode, name: &str) -> bool {
    let pod = node.agent.pod_name(name);
    let id = node.agent.containers().into_iter().find(|c| {
        c.state.running
            && c.config.labels.as_ref().is_some_and(|l| {
                l.get("io.kubernetes.pod.name") == Some(&pod)
                    && l.get("io.kubernetes.container.name").map(String::as_str) == Some("main")
            })
    });
    let Some(c) = id else { return false };
    Command::new("docker")
        .args(["exec", &c.id, "cat", "/etc/hosts"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&pod))
}

pub fn disk_full(ctx: &Ctx, _s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let tmpfs = Tmpfs::mount()?;
    let root = tmpfs.path().display().to_string();
    let mut node = ChaosNode::start(ctx, "disk", &["--root-dir", &root])?;
    for i in 0..PODS {
        let name = format!("disk-{i}");
        node.write_manifest(&format!("{name}.yaml"), &pod_with_volume(&name));
    }
    node.wait_ready("disk-", PODS, start_timeout(PODS))?;
    let filled = fill(&tmpfs.path().join("fill"))?;
    let staying: Vec<_> = (0..PODS - 1).collect();
    let before = node.running();

    // One pod deleted while full (what it frees is filled again), then new pods.
    node.remove_manifest(&format!("disk-{}.yaml", PODS - 1));
    std::thread::sleep(Duration::from_secs(5));
    let filled = filled + fill(&tmpfs.path().join("fill-again"))?;
    for i in 0..NEW_PODS {
        let name = format!("new-{i}");
        node.write_manifest(&format!("{name}.yaml"), &pod_with_volume(&name));
    }
    std::thread::sleep(Duration::from_secs(20));
    let alive = node.agent.pid().is_some() && node.healthz().is_some();
    let deleted_gone = node.counts("disk-")?.listed == PODS - 1;
    let log = std::fs::read_to_string(node.agent.log_path()).unwrap_or_default();
    let explained = log
        .lines()
        .filter(|l| l.contains("No space left on device") && l.contains(&root))
        .count();
    let new_running = node.counts("new-")?.running;
    let corrupt_full = corrupt_json(tmpfs.path());
    // Only the deleted pod's containers are gone.
    let after = node.running();
    let untouched = before.keys().filter(|id| !after.contains_key(*id)).count() <= 2;

    for f in ["fill", "fill-again"] {
        std::fs::remove_file(tmpfs.path().join(f)).context("free the space")?;
    }
    let freed = Instant::now();
    node.wait_ready("new-", NEW_PODS, start_timeout(NEW_PODS))?;
    let recovered = freed.elapsed().as_secs_f64();
    let hosts_ok = (0..NEW_PODS).all(|i| hosts_names_pod(&node, &format!("new-{i}")));
    let corrupt = corrupt_json(tmpfs.path());

    let settled = node.running();
    node.kill9();
    node.restart();
    node.wait_ready("", staying.len() + NEW_PODS, Duration::from_secs(60))?;
    let adopted = hold_unchanged(&node, &settled, Duration::from_secs(5));

    let mut o = Outcome::default();
    o.check(
        "the agent runs on, its pods untouched",
        format!(
            "alive {alive}; {}",
            if untouched {
                describe(&before, &before)
            } else {
                difference(&before, &after).unwrap_or_default()
            }
        ),
        alive && untouched,
    );
    o.check(
        "the deleted pod is gone, the new ones wait",
        format!("deleted gone {deleted_gone}; new running {new_running} of {NEW_PODS}"),
        deleted_gone && new_running == 0,
    );
    o.check(
        "the log names the file and \"No space left on device\"",
        format!("{explained} lines"),
        explained > 0,
    );
    o.check(
        "no state file half-written (every *.json parses; the new pods' /etc/hosts names them)",
        format!(
            "corrupt while full {}, after {}; /etc/hosts {}",
            corrupt_full.len(),
            corrupt.len(),
            if hosts_ok { "right" } else { "wrong" }
        ),
        corrupt_full.is_empty() && corrupt.is_empty() && hosts_ok,
    );
    o.check(
        "space freed: the new pods run; a restart adopts every pod",
        format!(
            "new pods ready {recovered:.1} s after; after the restart: {}",
            adopted.as_deref().unwrap_or("unchanged")
        ),
        adopted.is_none(),
    );
    o.figure("filled_bytes", filled);
    o.figure("recovered_s", recovered);
    Ok(o)
}
