//! The static pod manifests of each scenario, and the baseline's matching commands.

/// `sleep 3600`: the container of P1 and P3.
pub const SLEEP_CMD: &[&str] = &["sleep", "3600"];

/// A shell that leaves on SIGTERM at once (a plain `sleep` as PID 1 ignores it and waits out the
/// grace period), so a P2 pod is gone in well under a second when its manifest is deleted.
pub const SLEEP_TRAP_CMD: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

/// busybox httpd serving `/tmp/index.html` on port 8080: the target of the readiness probes.
pub const HTTPD_CMD: &[&str] = &["sh", "-c", "echo ok > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"];

/// What probes a steady-state pod carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probes {
    /// A 1 s httpGet readiness probe (P4/P5).
    HttpReadiness,
    /// A 1 s httpGet readiness probe and a 1 s exec liveness probe running `true` (P5b).
    HttpReadinessExecLiveness,
}

/// A pod `name` with one busybox container `main` running `cmd`, restartPolicy Always.
pub fn pod(name: &str, cmd: &[&str], probes: Option<Probes>) -> String {
    let command: Vec<String> = cmd.iter().map(|c| serde_json::Value::from(*c).to_string()).collect();
    let mut yaml = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 0
  containers:
    - name: main
      image: dockerlet.local/busybox:1
      imagePullPolicy: IfNotPresent
      command: [{}]
",
        command.join(", ")
    );
    if probes.is_some() {
        yaml.push_str(
            "      readinessProbe:
        httpGet:
          path: /index.html
          port: 8080
        periodSeconds: 1
",
        );
    }
    if probes == Some(Probes::HttpReadinessExecLiveness) {
        yaml.push_str(
            "      livenessProbe:
        exec:
          command: [\"true\"]
        periodSeconds: 1
",
        );
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands are quoted as YAML flow sequences (JSON strings), probes appended per kind.
    #[test]
    fn manifests_quote_commands_and_add_probes() {
        let plain = pod("p1-0", SLEEP_TRAP_CMD, None);
        assert!(
            plain.contains(r#"command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]"#),
            "{plain}"
        );
        assert!(!plain.contains("Probe"));
        let both = pod("p5b-0", HTTPD_CMD, Some(Probes::HttpReadinessExecLiveness));
        assert!(
            both.contains("readinessProbe:") && both.contains("livenessProbe:"),
            "{both}"
        );
        let http = pod("p5-0", HTTPD_CMD, Some(Probes::HttpReadiness));
        assert!(
            http.contains("readinessProbe:") && !http.contains("livenessProbe:"),
            "{http}"
        );
    }
}
