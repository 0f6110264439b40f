//! [`SecondEngine`]: a Docker daemon of a test's own, for tests whose agent must not touch the
//! engine every other test shares (image GC would remove their images). Its data, exec root,
//! PID file and socket live in a temporary directory; dropping it (also on panic) stops the
//! daemon — SIGTERM, then SIGKILL after 20 s — unmounts what it left and removes the directory.
//!
//! Measured on the test machine (Docker 20.10.24, cgroup v1, cgroupfs): answers within 0.5 s of
//! its start; `docker save | docker -H … load` of busybox takes 0.2 s.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long the daemon may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it may take to stop on SIGTERM (it stops its containers first).
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A second `dockerd`, its own in everything but the kernel (and the cgroup driver).
pub struct SecondEngine {
    dir: Option<tempfile::TempDir>,
    child: Option<Child>,
    /// Its bridge interface, made for it and deleted with it.
    bridge: String,
}

/// Engines started by this process so far: each gets its own bridge and subnet.
static ENGINES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Make the bridge interface `name` with the address `cidr`, up. A daemon started with
/// `--bridge none` deletes the machine's `docker0` (moby's `removeDefaultBridgeInterface`), which
/// breaks every other test on the shared engine; so the second engine gets a bridge of its own.
fn make_bridge(name: &str, cidr: &str) -> anyhow::Result<()> {
    let _ = Command::new("ip").args(["link", "del", name]).output();
    for args in [
        vec!["link", "add", name, "type", "bridge"],
        vec!["addr", "add", cidr, "dev", name],
        vec!["link", "set", name, "up"],
    ] {
        let out = Command::new("ip").args(&args).output().context("cannot run ip")?;
        if !out.status.success() {
            bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(())
}

impl SecondEngine {
    /// Start `dockerd` with its own data root, exec root, PID file, socket and bridge, and no
    /// iptables rules (the machine's networking, `docker0` included, is left alone); returns
    /// once it answers.
    pub fn start() -> anyhow::Result<SecondEngine> {
        let dir = tempfile::Builder::new()
            .prefix("dockerlet-engine-")
            .tempdir()
            .context("cannot create the second engine's directory")?;
        let p = dir.path();
        let log = std::fs::File::create(p.join("dockerd.log")).context("cannot create dockerd.log")?;
        let n = ENGINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let bridge = format!("dlgc{}x{n}", std::process::id() % 100_000);
        make_bridge(
            &bridge,
            &format!("10.231.{}.1/24", (std::process::id() % 200 + n) % 250),
        )?;
        let child = Command::new("dockerd")
            .args(["--data-root", &p.join("data").display().to_string()])
            .args(["--exec-root", &p.join("exec").display().to_string()])
            .args(["--pidfile", &p.join("dockerd.pid").display().to_string()])
            .args(["-H", &format!("unix://{}", p.join("d.sock").display())])
            .args([
                "--bridge",
                &bridge,
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("cannot share dockerd.log")?)
            .stderr(log)
            .spawn()
            .inspect_err(|_| {
                let _ = Command::new("ip").args(["link", "del", &bridge]).output();
            })
            .context("cannot run dockerd")?;
        let engine = SecondEngine {
            dir: Some(dir),
            child: Some(child),
            bridge,
        };
        let began = Instant::now();
        while !engine.docker(&["version"]).status.success() {
            if began.elapsed() > START_TIMEOUT {
                bail!(
                    "the second dockerd did not answer within {START_TIMEOUT:?}:\n{}",
                    engine.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(engine)
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().expect("the engine's directory").path()
    }

    /// `unix:///…/d.sock`, for `--container-runtime-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path().join("d.sock").display())
    }

    /// Its data root (Docker's root directory).
    pub fn data_root(&self) -> PathBuf {
        self.path().join("data")
    }

    /// `docker -H <its socket> <args>`.
    pub fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(["-H", &self.endpoint()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run `docker {}`: {e}", args.join(" ")))
    }

    /// [`SecondEngine::docker`], panicking if it fails; its stdout, trimmed.
    pub fn docker_ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert!(
            out.status.success(),
            "`docker -H {} {}` failed: {}",
            self.endpoint(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Copy `image` from the shared engine into this one (`docker save | docker load`).
    pub fn load_from_shared(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let status = Command::new("docker")
            .args(["-H", &self.endpoint(), "load", "-q"])
            .stdin(save.stdout.take().expect("docker save's stdout"))
            .stdout(Stdio::null())
            .status()
            .expect("docker load");
        let saved = save.wait().expect("docker save");
        assert!(
            saved.success() && status.success(),
            "cannot copy {image} into the second engine"
        );
    }

    /// Whether the image exists on this engine.
    pub fn image_exists(&self, reference: &str) -> bool {
        self.docker(&["image", "inspect", reference]).status.success()
    }

    /// The daemon's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("dockerd.log")).unwrap_or_default()
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let began = Instant::now();
            while began.elapsed() < STOP_TIMEOUT && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- second dockerd's log (last 30 lines):\n{}",
                crate::harness::tail(&self.log(), 30)
            );
        }
        if let Some(dir) = self.dir.take() {
            crate::harness::unmount_under(dir.path());
            let _ = dir.close();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}
