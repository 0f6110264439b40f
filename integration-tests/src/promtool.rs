//! `promtool check metrics`: the Prometheus project's own linter of the text format.

use std::io::Write;
use std::process::{Command, Stdio};

/// Run `promtool check metrics` on `body` and fail the test with its complaints. promtool comes
/// with Debian's `prometheus` package, which `.ci/run` installs; without it the test fails, as
/// it cannot check what it promises.
pub fn promtool_check(what: &str, body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool is needed (apt-get install prometheus): {e}"));
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(body.as_bytes())
        .expect("promtool reads its input");
    let out = child.wait_with_output().expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check metrics on {what}: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
