//! A private registry for pull tests: Debian's `docker-registry` (distribution 2.x) on a free
//! 127.0.0.1 port, storing under a temporary directory, with htpasswd basic auth when asked.
//! Docker treats 127.0.0.0/8 registries as insecure, so plain HTTP serves.
//!
//! [`Registry::push`] puts `dockerlet.local/busybox:1` under a repository of the test's own and
//! removes the local tag again, so only a pull brings it back. Dropping the registry stops it
//! and removes every local tag under its address.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::docker::{docker, docker_ok};
use crate::harness::free_port;
use crate::wait::wait_until;

/// The registry's user and password, when it has auth.
pub const USER: &str = "alice";
/// The password of [`USER`].
pub const PASSWORD: &str = "s3cret";

/// A running registry.
pub struct Registry {
    child: Child,
    dir: TempDir,
    addr: String,
    auth: bool,
}

impl Registry {
    /// Start a registry; with `auth`, every request needs [`USER`]/[`PASSWORD`]. Panics, naming
    /// the Debian package, when `docker-registry` or `htpasswd` is missing (never a silent
    /// skip).
    pub fn start(auth: bool) -> Registry {
        let dir = tempfile::tempdir().expect("registry dir");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if auth {
            let htpasswd = Command::new("htpasswd")
                .args(["-Bbn", USER, PASSWORD])
                .output()
                .expect("htpasswd is missing: apt-get install apache2-utils");
            assert!(htpasswd.status.success(), "htpasswd failed");
            std::fs::write(dir.path().join("htpasswd"), &htpasswd.stdout).expect("write htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: basic-realm\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).expect("write the registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry is missing: apt-get install docker-registry");
        let registry = Registry { child, dir, addr, auth };
        let url = format!("http://{}/v2/", registry.addr);
        wait_until("the registry answers", Duration::from_secs(20), || {
            match ureq::get(&url).call() {
                Ok(_) => Ok(()),
                Err(ureq::Error::StatusCode(401)) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        });
        registry
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Push the test image as `<addr>/<repository>:1` and remove the local tag; returns the
    /// reference.
    pub fn push(&self, repository: &str) -> String {
        self.push_image("dockerlet.local/busybox:1", repository)
    }

    /// Push the local image `local` as `<addr>/<repository>:1` and remove that tag; returns
    /// the reference.
    pub fn push_image(&self, local: &str, repository: &str) -> String {
        let reference = format!("{}/{repository}:1", self.addr);
        docker_ok(&["tag", local, &reference]);
        let config = self.dir.path().join("docker-config");
        let config = config.to_str().expect("utf-8 path");
        if self.auth {
            let login = Command::new("docker")
                .args(["--config", config, "login", "-u", USER, "--password-stdin", &self.addr])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write as _;
                    child.stdin.take().expect("stdin").write_all(PASSWORD.as_bytes())?;
                    child.wait_with_output()
                })
                .expect("docker login");
            assert!(
                login.status.success(),
                "docker login: {}",
                String::from_utf8_lossy(&login.stderr)
            );
        }
        let push = docker(&["--config", config, "push", &reference]);
        assert!(
            push.status.success(),
            "docker push: {}",
            String::from_utf8_lossy(&push.stderr)
        );
        docker_ok(&["rmi", &reference]);
        reference
    }

    /// The registry's directory (its log is `registry.log` there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A Docker config.json granting [`USER`] on this registry.
    pub fn docker_config_json(&self) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        serde_json::json!({ "auths": { self.addr.clone(): { "auth": auth } } }).to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let tags = docker(&[
            "images",
            "--format",
            "{{.Repository}}:{{.Tag}}",
            &format!("{}/*/*", self.addr),
        ]);
        let listed = String::from_utf8_lossy(&tags.stdout).into_owned();
        let more = docker(&[
            "images",
            "--format",
            "{{.Repository}}:{{.Tag}}",
            &format!("{}/*", self.addr),
        ]);
        let listed = listed + &String::from_utf8_lossy(&more.stdout);
        for tag in listed.lines().filter(|l| !l.trim().is_empty()) {
            let _ = docker(&["rmi", tag]);
        }
    }
}
