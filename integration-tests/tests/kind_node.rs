//! The README's kind-style node: the agent inside a container of the same engine, with the
//! Docker socket mounted, the host's network and PID namespace, and its root directory at the
//! same path inside and out. Its pods run, and its probes (httpGet to the pod IP, exec) work.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use dockerlet_integration_tests::docker::{docker, docker_ok, remove_node_containers};
use dockerlet_integration_tests::harness::{binary, cgroup_root, free_port, remove_cgroup_tree, unique_node_name};
use dockerlet_integration_tests::{wait_for, POD_START_TIMEOUT};
use serde_json::Value;

/// Removes the agent's container, its pods' containers and the image, also on failure.
struct Cleanup {
    container: String,
    node: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = docker(&["logs", "--tail", "50", &self.container]);
            eprintln!(
                "---- agent container log:\n{}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
        let _ = docker(&["rm", "-f", &self.container]);
        remove_node_containers(&self.node);
        if let Err(e) = remove_cgroup_tree(&cgroup_root(&self.node)) {
            eprintln!("---- node {}: cgroup tree left behind: {e}", self.node);
        }
        let _ = docker(&["rmi", &self.image]);
    }
}

/// An image holding the agent binary and the shared libraries it links (as `ldd` lists them).
fn build_image(image: &str) {
    let root = tempfile::tempdir().expect("image root");
    let bin = binary();
    let place = |src: &Path, dest: &Path| {
        let target = root.path().join(dest.strip_prefix("/").expect("absolute path"));
        std::fs::create_dir_all(target.parent().expect("a parent")).expect("image dir");
        std::fs::copy(src, &target).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    };
    place(&bin, Path::new("/usr/local/bin/dockerlet"));
    let ldd = Command::new("ldd").arg(&bin).output().expect("run ldd");
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
        let path = line.split("=>").last().and_then(|s| s.split_whitespace().next());
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            let canonical = std::fs::canonicalize(path).expect("library path");
            place(&canonical, Path::new(path));
        }
    }
    let tar = Command::new("tar")
        .args(["-C", root.path().to_str().expect("utf-8"), "-c", "."])
        .output()
        .expect("tar the image root");
    let mut import = Command::new("docker")
        .args(["import", "-", image])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("docker import");
    import
        .stdin
        .take()
        .expect("stdin")
        .write_all(&tar.stdout)
        .expect("send the image");
    assert!(import.wait().expect("docker import").success(), "docker import failed");
}

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo ok > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"]
    readinessProbe:
      httpGet: {port: 8080, path: /index.html}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
"#;

/// The agent in a container runs a pod whose readiness (httpGet) and liveness (exec) probes
/// pass, exactly as the README's `docker run` line starts it.
#[test]
fn the_agent_runs_as_a_kind_style_node_in_a_container() {
    let node = unique_node_name("kind-node");
    let image = format!("dockerlet.local/dockerlet-node:{node}");
    let cleanup = Cleanup {
        container: format!("dockerlet-{node}"),
        node: node.clone(),
        image: image.clone(),
    };
    build_image(&image);
    // The root directory must have the same path in the agent's container and on the host:
    // Docker resolves the bind mounts the agent asks for on the host.
    let work = tempfile::Builder::new()
        .prefix(&format!("dockerlet-{node}-"))
        .tempdir()
        .expect("work dir");
    let work_path = work.path().to_str().expect("utf-8").to_string();
    std::fs::create_dir_all(work.path().join("manifests")).expect("manifest dir");
    std::fs::write(work.path().join("manifests/web.yaml"), POD).expect("manifest");
    // kubelet's kernel tunables: a container's /proc/sys is read-only, so the README has the
    // host set them once and the agent only check them (`--protect-kernel-defaults`). This
    // machine's tunables are not the test's to change: a tree with kubelet's values stands in
    // for such a host's (the hidden `--proc-sys-root`).
    let sys = work.path().join("proc-sys");
    let kubelets_values = [
        ("vm/overcommit_memory", 1),
        ("vm/panic_on_oom", 0),
        ("kernel/panic", 10),
        ("kernel/panic_on_oops", 1),
        ("kernel/keys/root_maxkeys", 1_000_000),
        ("kernel/keys/root_maxbytes", 25_000_000),
    ];
    for (flag, value) in kubelets_values {
        let file = sys.join(flag);
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("tunable dir");
        std::fs::write(&file, format!("{value}\n")).expect("tunable");
    }
    let (read_only, healthz) = (free_port(), free_port());
    let mount = format!("{work_path}:{work_path}");
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &cleanup.container,
        "--network",
        "host",
        "--pid",
        "host",
        "-v",
        "/var/run/docker.sock:/var/run/docker.sock",
        "-v",
        "/sys/fs/cgroup:/sys/fs/cgroup",
        "-v",
        &mount,
        &image,
        "/usr/local/bin/dockerlet",
        "--pod-manifest-path",
        &format!("{work_path}/manifests"),
        "--root-dir",
        &format!("{work_path}/root"),
        "--hostname-override",
        &node,
        "--cgroup-root",
        &cgroup_root(&node),
        "--read-only-port",
        &read_only.to_string(),
        "--healthz-port",
        &healthz.to_string(),
        "--debug-address",
        &format!("127.0.0.1:{}", free_port()),
        "--port",
        &free_port().to_string(),
        "--protect-kernel-defaults",
        "--proc-sys-root",
        &format!("{work_path}/proc-sys"),
    ]);
    let url = format!("http://127.0.0.1:{read_only}/pods");
    let pod = wait_for("the pod Running and ready", POD_START_TIMEOUT, || {
        let body = ureq::get(&url).call().ok()?.body_mut().read_to_string().ok()?;
        let list: Value = serde_json::from_str(&body).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|p| {
                p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == Value::Bool(true)
            })
            .cloned()
    });
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0);
    let healthz = ureq::get(&format!("http://127.0.0.1:{healthz}/healthz"))
        .call()
        .expect("healthz")
        .body_mut()
        .read_to_string()
        .expect("healthz body");
    assert_eq!(healthz, "ok");
    drop(cleanup);
}
