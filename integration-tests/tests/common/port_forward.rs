//! `kubectl port-forward` run against the test API server, and plain HTTP/1.0 over what it
//! forwards: shared by the port-forward tests and the CNI tests (a pod on the CNI network
//! reached through the kubelet's port-forward).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dockerlet_fake_apiserver::{ApiServer, KUBECTL};
use dockerlet_integration_tests::CHANGE_TIMEOUT;

/// How long a read or write on a forwarded connection may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `kubectl port-forward`: its stdout lines as they come, its stderr so far; killed on
/// drop.
pub struct PortForward {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl PortForward {
    pub fn start(api: &ApiServer, websockets: &str, args: &[&str]) -> PortForward {
        let mut child = Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(api.kubeconfig_path())
            .arg("--cache-dir")
            .arg(api.dir().join("kube-cache"))
            .arg("port-forward")
            .args(args)
            .env_remove("KUBECONFIG")
            .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl port-forward");
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        PortForward { child, lines, stderr }
    }

    /// The local port of each remote port, from kubectl's `Forwarding from 127.0.0.1:<local> ->
    /// <remote>` lines.
    pub fn local_ports(&self, remotes: &[u16]) -> Vec<u16> {
        let deadline = Instant::now() + CHANGE_TIMEOUT;
        let mut found: Vec<Option<u16>> = vec![None; remotes.len()];
        let mut seen = Vec::new();
        while found.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!("kubectl printed {seen:?}, stderr {:?}", self.stderr());
            };
            if let Some((local, remote)) = line
                .strip_prefix("Forwarding from 127.0.0.1:")
                .and_then(|rest| rest.split_once(" -> "))
            {
                let remote: u16 = remote.trim().parse().unwrap();
                if let Some(i) = remotes.iter().position(|r| *r == remote) {
                    found[i] = Some(local.parse().unwrap());
                }
            }
            seen.push(line);
        }
        found.into_iter().map(Option::unwrap).collect()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to kubectl's local port");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// `GET <path>` over HTTP/1.0 and the whole response.
pub fn http_get(port: u16, path: &str) -> String {
    let mut stream = connect(port);
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut body = Vec::new();
    stream.read_to_end(&mut body).expect("the HTTP response");
    String::from_utf8_lossy(&body).into_owned()
}
