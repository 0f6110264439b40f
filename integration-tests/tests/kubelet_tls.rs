//! Refused TLS handshakes on the kubelet API port: the agent logs each with the client's
//! address and the reason in words (as Go's HTTP server logs kubelet's, `http: TLS handshake
//! error from <addr>: <err>`), at most one line per address per 10 s, and goes on serving.
//! The certificates are made with the `openssl` CLI, which (unlike rcgen) makes X.509 v1
//! certificates: `openssl x509 -req` without extensions does, up to OpenSSL 3.1.

use std::path::{Path, PathBuf};
use std::process::Command;

use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, CHANGE_TIMEOUT};

/// Runs `openssl` with the arguments of `args` (split at spaces) in `dir`; panics with its
/// output unless it succeeds.
fn openssl(dir: &Path, args: &str) -> String {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new P-256 key, unencrypted.
const NEW_KEY: &str = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

/// A self-signed CA `<name>.crt` and `<name>.key` (v3, `CA:TRUE`).
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &format!("req -x509 {NEW_KEY} -keyout {name}.key -out {name}.crt -subj /CN={name} -days 2"),
    );
}

/// A client certificate `<name>.crt` (and `.key`) for CN `<name>`, signed by the CA `ca`: X.509
/// v3 with `extendedKeyUsage=clientAuth`, or v1 without `v3` (no extensions; OpenSSL 3.2 and
/// later make v3 unless told `-x509v1`).
fn make_client(dir: &Path, name: &str, ca: &str, v3: bool) -> (PathBuf, PathBuf) {
    let (crt, key, csr) = (format!("{name}.crt"), format!("{name}.key"), format!("{name}.csr"));
    openssl(
        dir,
        &format!("req -new {NEW_KEY} -keyout {key} -out {csr} -subj /CN={name}/O=devs"),
    );
    let signed_by = format!("-in {csr} -CA {ca}.crt -CAkey {ca}.key -out {crt} -days 2");
    if v3 {
        std::fs::write(dir.join("client-ext.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
        openssl(
            dir,
            &format!("x509 -req {signed_by} -CAcreateserial -extfile client-ext.cnf"),
        );
    } else {
        openssl(dir, &format!("x509 -req {signed_by} -CAcreateserial"));
    }
    let version = || openssl(dir, &format!("x509 -in {crt} -noout -text"));
    if !v3 && !version().contains("Version: 1 (0x0)") {
        openssl(dir, &format!("req -x509v1 {signed_by}"));
    }
    let text = version();
    let expected = if v3 { "Version: 3 (0x2)" } else { "Version: 1 (0x0)" };
    assert!(text.contains(expected), "{name}: {text}");
    (dir.join(crt), dir.join(key))
}

/// `GET https://127.0.0.1:<port><path>` with curl from the local address `from`, with a client
/// certificate; the status (0 when the handshake failed).
fn curl(port: u16, path: &str, from: &str, cert: &(PathBuf, PathBuf)) -> u16 {
    let out = Command::new("curl")
        .args([
            "-sk",
            "--max-time",
            "30",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--interface",
            from,
        ])
        .arg("--cert")
        .arg(&cert.0)
        .arg("--key")
        .arg(&cert.1)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

/// The agent's log lines about handshakes refused to `from`.
fn refusals(agent: &Agent, from: &str) -> Vec<String> {
    agent
        .log()
        .lines()
        .filter(|l| l.contains(&format!("TLS handshake error from {from}:")))
        .map(str::to_string)
        .collect()
}

/// An X.509 v1 client certificate signed by the `--client-ca-file` CA is refused and the log
/// says so in words with the client's address; a second one from that address within 10 s
/// gets no line; a v3 certificate of an unknown CA from another address gets its own line; a
/// valid certificate is then served as before.
#[test]
fn refused_client_certificates_are_logged_with_the_peer_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    make_ca(dir.path(), "node-client-ca");
    make_ca(dir.path(), "stranger-ca");
    let v1 = make_client(dir.path(), "old-style", "node-client-ca", false);
    let stranger = make_client(dir.path(), "stranger", "stranger-ca", true);
    let good = make_client(dir.path(), "alice", "node-client-ca", true);

    let manifests = ManifestDir::new();
    let ca = dir.path().join("node-client-ca.crt").display().to_string();
    let agent = Agent::start(
        "kubelet-tls",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    let port = agent.ports().kubelet;

    assert_eq!(
        curl(port, "/healthz", "127.0.0.1", &v1),
        0,
        "a v1 certificate is refused"
    );
    let lines = wait_until("the v1 refusal logged", CHANGE_TIMEOUT, || {
        let lines = refusals(&agent, "127.0.0.1");
        (!lines.is_empty()).then_some(lines).ok_or_else(|| agent.log())
    });
    assert!(
        lines[0].contains("client certificate is X.509 v1; only v3 certificates are accepted"),
        "{lines:?}"
    );
    assert!(lines[0].contains("WARN"), "{lines:?}");

    assert_eq!(curl(port, "/healthz", "127.0.0.1", &v1), 0);
    assert_eq!(
        curl(port, "/healthz", "127.0.0.2", &stranger),
        0,
        "an unknown CA is refused"
    );
    let lines = wait_until("the unknown CA's refusal logged", CHANGE_TIMEOUT, || {
        let lines = refusals(&agent, "127.0.0.2");
        (!lines.is_empty()).then_some(lines).ok_or_else(|| agent.log())
    });
    assert!(
        lines[0].contains("client certificate is not signed by a CA of --client-ca-file (unknown authority)"),
        "{lines:?}"
    );
    assert_eq!(
        refusals(&agent, "127.0.0.1").len(),
        1,
        "one line per address per 10 s: {}",
        agent.log()
    );

    assert_eq!(curl(port, "/healthz", "127.0.0.1", &good), 200, "still serving");
}
