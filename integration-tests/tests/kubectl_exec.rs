//! `kubectl exec`, `kubectl attach` and `kubectl cp` through the test API server's kubelet proxy
//! to the agent, both with kubectl's default (WebSocket to the API server, which passes it on)
//! and with `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` (SPDY/3.1 end to end).

use std::process::{Command, Output, Stdio};

mod common;

use dockerlet_fake_apiserver::{ApiServer, KUBECTL};
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, POD_START_TIMEOUT};

/// The two ways kubectl 1.32 speaks remote commands.
const MODES: [(&str, &str); 2] = [("websocket", "true"), ("spdy", "false")];

fn start(name: &str) -> (ApiServer, Agent, ManifestDir) {
    start_with(name, &[])
}

fn start_with(name: &str, agent_args: &[&str]) -> (ApiServer, Agent, ManifestDir) {
    let (api, agent, manifests) = common::proxied_node_with(name, agent_args);
    let path = api.dir().join("shell.yaml");
    std::fs::write(
        &path,
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: shell
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sleep", "3600"]
  - name: reader
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    stdin: true
    command: ["sh", "-c", "while read line; do echo got:$line; done"]
"#,
            node = agent.node()
        ),
    )
    .unwrap();
    api.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    wait_for("shell Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "shell")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    (api, agent, manifests)
}

/// kubectl against the API server, `websockets` saying which protocol; `stdin` piped in.
fn kubectl(api: &ApiServer, websockets: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    common::kubectl_with_stdin(api, &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", websockets)], args, stdin)
}

fn text(out: &Output) -> String {
    format!(
        "{} stdout={:?} stderr={:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `--streaming-connection-idle-timeout`: a `kubectl exec` on which nothing moves is closed by
/// the agent after the timeout, long before its command would end; one whose command writes
/// more often than that runs to its end. In both protocols.
#[test]
fn idle_exec_streams_are_closed_after_the_idle_timeout() {
    let (api, _agent, _manifests) = start_with("kubectl-idle", &["--streaming-connection-idle-timeout", "2s"]);
    for (mode, websockets) in MODES {
        let started = std::time::Instant::now();
        let out = kubectl(
            &api,
            websockets,
            &["exec", "shell", "-c", "app", "--", "sleep", "45"],
            None,
        );
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(30),
            "{mode}: the idle exec was not closed ({took:?}): {}",
            text(&out)
        );
        // kubectl over WebSocket reports the lost connection; over SPDY, as against kubelet, a
        // connection closed before the error stream said anything reads as success.
        assert!(out.stdout.is_empty(), "{mode}: {}", text(&out));

        let out = kubectl(
            &api,
            websockets,
            &[
                "exec",
                "shell",
                "-c",
                "app",
                "--",
                "sh",
                "-c",
                "for i in 1 2 3 4; do echo $i; sleep 1; done",
            ],
            None,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "1\n2\n3\n4\n",
            "{mode}: {}",
            text(&out)
        );
        assert!(out.status.success(), "{mode}: {}", text(&out));
    }
}

/// `kubectl exec` (output, `-i` stdin, the exit code), `kubectl exec -i -t` on a terminal with
/// its size, and `kubectl attach -i` to a container reading stdin, in both protocols.
#[test]
fn kubectl_exec_and_attach_in_both_protocols() {
    let (api, _agent, _manifests) = start("kubectl-exec");
    for (mode, websockets) in MODES {
        let out = kubectl(
            &api,
            websockets,
            &["exec", "shell", "-c", "app", "--", "echo", "hello"],
            None,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello\n",
            "{mode}: {}",
            text(&out)
        );

        let out = kubectl(
            &api,
            websockets,
            &["exec", "-i", "shell", "-c", "app", "--", "cat"],
            Some(b"piped in\n"),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "piped in\n",
            "{mode}: {}",
            text(&out)
        );

        let out = kubectl(
            &api,
            websockets,
            &["exec", "shell", "-c", "app", "--", "sh", "-c", "exit 3"],
            None,
        );
        assert_eq!(out.status.code(), Some(3), "{mode}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("command terminated with exit code 3"),
            "{mode}: {}",
            text(&out)
        );

        // A missing binary: Docker starts the exec and reports runc's error with exit code 126
        // (127 from older engines), which kubectl prints as for any other exit code.
        let out = kubectl(
            &api,
            websockets,
            &["exec", "shell", "-c", "app", "--", "/no/such/binary"],
            None,
        );
        let code = out.status.code();
        assert!(matches!(code, Some(126 | 127)), "{mode}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains(&format!("command terminated with exit code {}", code.unwrap())),
            "{mode}: {}",
            text(&out)
        );
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            all.contains("/no/such/binary") && all.contains("no such file or directory"),
            "{mode}: Docker's message: {}",
            text(&out)
        );

        // A terminal for kubectl (script(1) gives it a pty of 30 rows, 100 columns). The command
        // waits a moment: Docker before API 1.42 cannot size an exec's TTY before its start, so a
        // command looking at once may still see 0x0. `timeout --foreground` keeps kubectl in the
        // terminal's foreground process group: in timeout's own group, kubectl's switch to raw
        // mode is a background tcsetattr, which the kernel stops with SIGTTOU (a hang until the
        // timeout, as CI saw). script(1) runs the command with `$SHELL`; it is fixed to
        // /bin/sh so the test runs alike everywhere (bash execs the last command, so timeout
        // was the session leader and stayed in the foreground; dash does not).
        let command = format!(
            "stty rows 30 cols 100; KUBECTL_REMOTE_COMMAND_WEBSOCKETS={websockets} timeout --foreground 60 {KUBECTL} --kubeconfig {} --cache-dir {} exec -i -t shell -c app -- sh -c 'sleep 1; stty size'",
            api.kubeconfig_path().display(),
            api.dir().join("kube-cache").display()
        );
        let out = Command::new("script")
            .env("SHELL", "/bin/sh")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("30 100"),
            "{mode}: exec -i -t: {}",
            text(&out)
        );

        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "(echo hi-{mode}; sleep 3) | KUBECTL_REMOTE_COMMAND_WEBSOCKETS={websockets} timeout 8 {KUBECTL} --kubeconfig {} --cache-dir {} attach -i shell -c reader",
                api.kubeconfig_path().display(),
                api.dir().join("kube-cache").display()
            ))
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("got:hi-{mode}")),
            "{mode}: attach: {}",
            text(&out)
        );
    }
}

/// `kubectl cp` into the pod and back out (tar over exec's stdin and stdout), in both protocols.
#[test]
fn kubectl_cp_both_ways_in_both_protocols() {
    let (api, _agent, _manifests) = start("kubectl-cp");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("payload.txt");
    let content: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&local, &content).unwrap();
    for (mode, websockets) in MODES {
        let remote = format!("shell:/tmp/payload-{mode}.txt");
        let out = kubectl(
            &api,
            websockets,
            &["cp", "-c", "app", local.to_str().unwrap(), &remote],
            None,
        );
        assert!(out.status.success(), "{mode}: cp in: {}", text(&out));
        let out = kubectl(
            &api,
            websockets,
            &[
                "exec",
                "shell",
                "-c",
                "app",
                "--",
                "md5sum",
                &format!("/tmp/payload-{mode}.txt"),
            ],
            None,
        );
        assert!(out.status.success(), "{mode}: {}", text(&out));
        let back = dir.path().join(format!("back-{mode}.txt"));
        let out = kubectl(
            &api,
            websockets,
            &["cp", "-c", "app", &remote, back.to_str().unwrap()],
            None,
        );
        assert!(out.status.success(), "{mode}: cp out: {}", text(&out));
        assert_eq!(std::fs::read_to_string(&back).unwrap(), content, "{mode}");
    }
}

/// `kubectl attach -i` with piped input gets the output of what the input ran, also when the
/// container exits right after: without `stdinOnce` the end of the input is not passed on
/// (Docker would end the attach's output with it), with `stdinOnce` it closes the container's
/// stdin, so a shell reading it ends.
#[test]
fn an_attach_gets_the_output_of_its_input_with_and_without_stdin_once() {
    let (api, agent, _manifests) = common::proxied_node("attach-input");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: keeps-stdin}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh"]
    stdin: true
---
apiVersion: v1
kind: Pod
metadata: {{name: stdin-once}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh"]
    stdin: true
    stdinOnce: true
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "attach.yaml", &yaml);
    for (pod, input, expected) in [
        ("keeps-stdin", "echo hello; exit 0\n", "hello\n"),
        ("stdin-once", "echo hello-once\n", "hello-once\n"),
    ] {
        common::wait_for_phase(&api, pod, "Running", POD_START_TIMEOUT);
        let out = common::kubectl_with_stdin(&api, &[], &["attach", "-i", pod, "-c", "c"], Some(input.as_bytes()));
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{pod}: {}", text(&out));
        common::wait_for_phase(&api, pod, "Succeeded", POD_START_TIMEOUT);
    }
}

/// Runs `command` under script(1) (a terminal of 30 rows, 100 columns, `/bin/sh` as its shell,
/// as in [`kubectl_exec_and_attach_in_both_protocols`]) and types `input` into the terminal
/// `after` its start; the terminal's input stays open until the command ends, so script(1)
/// never sees an end of input it would pass on.
fn in_terminal(command: &str, input: &'static [u8], after: std::time::Duration) -> Output {
    use std::io::Write;
    let mut child = Command::new("script")
        .env("SHELL", "/bin/sh")
        .args(["-qec", &format!("stty rows 30 cols 100; {command}"), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script");
    let mut keyboard = child.stdin.take().expect("script's stdin");
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let typist = std::thread::spawn(move || {
        if ended.recv_timeout(after).is_err() {
            let _ = keyboard.write_all(input);
            let _ = keyboard.flush();
            let _ = ended.recv();
        }
    });
    let out = child.wait_with_output().expect("script's output");
    let _ = done.send(());
    typist.join().expect("the typist thread");
    out
}

/// `kubectl attach -i -t` to a container with a terminal (`stdin` and `tty`): what is typed
/// reaches its shell, and the shell sees kubectl's terminal size; `kubectl debug -i -t` adds an
/// ephemeral container with a terminal and attaches to it the same way, ending when its shell
/// exits. In both protocols.
#[test]
fn kubectl_attach_and_debug_with_a_terminal_in_both_protocols() {
    let (api, agent, _manifests) = common::proxied_node("kubectl-tty");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: term}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: sh
    image: dockerlet.local/busybox:1
    stdin: true
    tty: true
    command: ["sh"]
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "term.yaml", &yaml);
    common::wait_for_phase(&api, "term", "Running", POD_START_TIMEOUT);
    let kubectl = format!(
        "{KUBECTL} --kubeconfig {} --cache-dir {}",
        api.kubeconfig_path().display(),
        api.dir().join("kube-cache").display()
    );
    // The shell echoes what is typed; only the answers hold `marker-42` and the size alone.
    for (mode, websockets) in MODES {
        let out = in_terminal(
            &format!(
                "KUBECTL_REMOTE_COMMAND_WEBSOCKETS={websockets} timeout --foreground 10 {kubectl} attach -i -t term -c sh"
            ),
            b"sleep 1; echo size=$(stty size); echo marker-$((6*7))\r",
            std::time::Duration::from_secs(3),
        );
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(
            seen.contains("size=30 100") && seen.contains("marker-42"),
            "{mode}: attach -i -t: {}",
            text(&out)
        );

        let out = in_terminal(
            &format!(
                "KUBECTL_REMOTE_COMMAND_WEBSOCKETS={websockets} timeout --foreground 60 {kubectl} debug -i -t term -c debug-{mode} --image=dockerlet.local/busybox:1 --image-pull-policy=IfNotPresent -- sh"
            ),
            b"sleep 1; echo size=$(stty size); echo marker-$((6*7)); exit 0\r",
            std::time::Duration::from_secs(3),
        );
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && seen.contains("size=30 100") && seen.contains("marker-42"),
            "{mode}: debug -i -t: {}",
            text(&out)
        );
    }
}
