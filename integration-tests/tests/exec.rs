//! `/exec`, `/attach` and `/run` on the kubelet API against the real agent and Docker, with a
//! client certificate, over every streaming protocol kubelets speak: SPDY/3.1 (`v4`, `v3`, `v2`,
//! `channel.k8s.io`) and WebSocket (`v5`, `v4`, `channel.k8s.io`, `base64.channel.k8s.io`).

use std::time::Duration;

use dockerlet_integration_tests::docker::docker_ok;
use dockerlet_integration_tests::kubelet_stream::{
    ClientPki, KubeletClient, Outcome, Remote, Streams, Transport, TRANSPORTS,
};
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, CHANGE_TIMEOUT};

const END: Duration = Duration::from_secs(60);

/// A pod with a long-running container `app` and a container `reader` that echoes its stdin.
fn start(test: &str) -> (Agent, ManifestDir, ClientPki) {
    let pki = ClientPki::new().unwrap();
    let manifests = ManifestDir::new();
    manifests.write(
        "shell.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: shell
spec:
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
    );
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        test,
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    agent.wait_for_running("shell");
    (agent, manifests, pki)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn exec_path(agent: &Agent, container: &str, cmd: &[&str]) -> String {
    let query: Vec<String> = cmd.iter().map(|c| format!("command={}", encode(c))).collect();
    format!(
        "/exec/default/{}/{container}?{}",
        agent.pod_name("shell"),
        query.join("&")
    )
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Is the status a success for this transport (v4+: `Success` JSON; older: nothing)?
fn succeeded(transport: Transport, outcome: &Outcome) -> bool {
    if json_status(transport) {
        outcome.status()["status"] == "Success"
    } else {
        outcome.error.is_empty()
    }
}

fn json_status(transport: Transport) -> bool {
    matches!(
        transport,
        Transport::Spdy("v5.channel.k8s.io" | "v4.channel.k8s.io")
            | Transport::Ws("v5.channel.k8s.io" | "v4.channel.k8s.io")
    )
}

const OUT: Streams = Streams {
    stdin: false,
    stdout: true,
    stderr: true,
    tty: false,
};

async fn run(
    client: &KubeletClient,
    transport: Transport,
    path: &str,
    streams: Streams,
    stdin: Option<&[u8]>,
) -> Outcome {
    let mut remote = Remote::start(client, transport, path, streams)
        .await
        .unwrap_or_else(|e| panic!("{transport:?} {path}: {e:#}"));
    if let Some(data) = stdin {
        remote.write_stdin(data).await.unwrap();
        remote.close_stdin().await.unwrap();
    }
    remote
        .finish(END)
        .await
        .unwrap_or_else(|e| panic!("{transport:?} {path}: {e:#}"))
}

/// Over each protocol: `echo`'s output on stdout, stdin piped to `cat`, stderr apart from
/// stdout, exit code 3 as kubelet's `NonZeroExitCode` Status with the `ExitCode` cause, and a
/// missing binary with the code Docker gives it.
#[test]
fn exec_speaks_every_protocol() {
    let (agent, _manifests, pki) = start("exec-protocols");
    let client = pki.client(agent.ports().kubelet).unwrap();
    runtime().block_on(async {
        for transport in TRANSPORTS {
            let echo = run(
                &client,
                transport,
                &exec_path(&agent, "app", &["echo", "hello", "world"]),
                OUT,
                None,
            )
            .await;
            assert_eq!(echo.stdout(), "hello world\n", "{transport:?}: {echo:?}");
            assert!(succeeded(transport, &echo), "{transport:?}: {echo:?}");

            let streams = Streams { stdin: true, ..OUT };
            // Only SPDY and v5 can end stdin; older WebSocket protocols read one line.
            let can_close = !matches!(transport, Transport::Ws(p) if p != "v5.channel.k8s.io");
            let reader: &[&str] = if can_close { &["cat"] } else { &["head", "-n", "1"] };
            let cat = run(
                &client,
                transport,
                &exec_path(&agent, "app", reader),
                streams,
                Some(b"piped through\n"),
            )
            .await;
            assert_eq!(cat.stdout(), "piped through\n", "{transport:?}: {cat:?}");

            let split = run(
                &client,
                transport,
                &exec_path(&agent, "app", &["sh", "-c", "echo out; echo err >&2"]),
                OUT,
                None,
            )
            .await;
            assert_eq!(
                (split.stdout(), split.stderr()),
                ("out\n".into(), "err\n".into()),
                "{transport:?}"
            );

            let three = run(
                &client,
                transport,
                &exec_path(&agent, "app", &["sh", "-c", "exit 3"]),
                OUT,
                None,
            )
            .await;
            if json_status(transport) {
                let status = three.status();
                assert_eq!(status["status"], "Failure", "{transport:?}: {status}");
                assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
                assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode", "{status}");
                assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");
                assert_eq!(
                    status["message"],
                    "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
                );
            } else {
                let text = String::from_utf8_lossy(&three.error).into_owned();
                assert!(text.contains("exit code 3"), "{transport:?}: {text}");
            }
        }
        let missing = run(
            &client,
            Transport::Ws("v5.channel.k8s.io"),
            &exec_path(&agent, "app", &["/no/such/binary"]),
            OUT,
            None,
        )
        .await;
        let status = missing.status();
        let code = status["details"]["causes"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            code == "126" || code == "127",
            "Docker's code for a missing binary: {status} {missing:?}"
        );
    });
}

/// A TTY exec takes the client's terminal size (`stty size` shows it, over SPDY and WebSocket);
/// attach connects to a running container's stdin and stdout.
#[test]
fn tty_resize_and_attach() {
    let (agent, _manifests, pki) = start("exec-tty");
    let client = pki.client(agent.ports().kubelet).unwrap();
    runtime().block_on(async {
        for transport in [Transport::Spdy("v4.channel.k8s.io"), Transport::Ws("v5.channel.k8s.io")] {
            let streams = Streams {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true,
            };
            let mut shell = Remote::start(&client, transport, &exec_path(&agent, "app", &["sh"]), streams)
                .await
                .unwrap();
            shell.resize(123, 45).await.unwrap();
            let mut seen = false;
            for _ in 0..50 {
                shell.write_stdin(b"stty size\n").await.unwrap();
                if shell
                    .read_until(Duration::from_millis(500), |o| o.stdout().contains("45 123"))
                    .await
                {
                    seen = true;
                    break;
                }
            }
            assert!(seen, "{transport:?}: stty size after resize: {:?}", shell.seen.stdout());
            shell.write_stdin(b"exit 0\n").await.unwrap();
            let outcome = shell.finish(END).await.unwrap();
            assert!(succeeded(transport, &outcome), "{transport:?} {outcome:?}");

            let streams = Streams {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false,
            };
            let path = format!("/attach/default/{}/reader", agent.pod_name("shell"));
            let mut attached = Remote::start(&client, transport, &path, streams).await.unwrap();
            let mut seen = false;
            for i in 0..20 {
                attached.write_stdin(format!("ping{i}\n").as_bytes()).await.unwrap();
                if attached
                    .read_until(Duration::from_millis(500), |o| o.stdout().contains("got:ping"))
                    .await
                {
                    seen = true;
                    break;
                }
            }
            assert!(seen, "{transport:?}: attach echo: {:?}", attached.seen);
            attached.disconnect();
        }
    });
}

/// `/run` returns the output (200) or kubelet's 500 for a non-zero exit; unknown pods and
/// containers are 404 with kubelet's messages; bad queries 400 naming the parameter; a refused
/// protocol 403; 20 execs at once all finish.
#[test]
fn run_errors_and_concurrent_execs() {
    let (agent, _manifests, pki) = start("exec-run");
    let client = pki.client(agent.ports().kubelet).unwrap();
    let pod = agent.pod_name("shell");
    runtime().block_on(async {
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/app?cmd=echo%20ran%20here"))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (200, "ran here\n"));
        let uid = agent.pod("shell").unwrap().metadata.uid.unwrap();
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/{uid}/app?cmd=echo%20by%20uid"))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (200, "by uid\n"));
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/app?cmd=ls%20/nope"))
            .await
            .unwrap();
        assert_eq!(
            (status, body.as_str()),
            (
                500,
                "command 'ls /nope' exited with 1: ls: /nope: No such file or directory\n"
            )
        );
        let (status, body) = client.request("POST", "/run/default/ghost/app?cmd=true").await.unwrap();
        assert_eq!((status, body.as_str()), (404, "pod does not exist"));
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/nope?cmd=true"))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (404, "container not found (\"nope\")"));
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/wrong-uid/app?cmd=true"))
            .await
            .unwrap();
        assert_eq!(status, 404, "{body}");
        // kubelet splits the first `cmd` (none: one empty argument) and the runtime refuses it.
        let (status, body) = client
            .request("POST", &format!("/run/default/{pod}/app"))
            .await
            .unwrap();
        assert_eq!(status, 500, "{body}");

        // Only kube-apiserver's names ask for streams: `output=maybe`, or the `PodExecOptions`
        // names a client sends the API server, ask for none (kubelet's NewOptions).
        for query in [
            "command=true&output=maybe",
            "command=true&stdin=1&stdout=1&stderr=1",
            "command=true",
        ] {
            let (status, body) = client
                .request("POST", &format!("/exec/default/{pod}/app?{query}"))
                .await
                .unwrap();
            assert_eq!(
                (status, body.as_str()),
                (400, "you must specify at least 1 of stdin, stdout, stderr"),
                "{query}"
            );
        }
        // A request that is not an upgrade reaches kubelet's upgrade-required proxy: 500.
        let (status, body) = client
            .request("POST", &format!("/exec/default/{pod}/app?command=true&output=1"))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (500, "Upgrade request required\n"));
        let (status, body) = client
            .request("POST", "/exec/default/ghost/app?command=true&output=1")
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (404, "pod does not exist"));
        let (status, body) = client
            .request("POST", &format!("/attach/default/{pod}/nope?output=1"))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (404, "container not found (\"nope\")"));
        match client
            .spdy(
                &(exec_path(&agent, "app", &["true"]) + "&output=1"),
                &["v9.channel.k8s.io"],
            )
            .await
        {
            Err(e) => {
                let refused = e
                    .downcast::<dockerlet_integration_tests::kubelet_stream::Refused>()
                    .unwrap();
                assert_eq!(refused.status, 403, "{refused}");
            }
            Ok(_) => panic!("an unknown SPDY protocol version was accepted"),
        }

        let runs: Vec<_> = (0..20)
            .map(|i| {
                let client = client.clone();
                let transport = if i % 2 == 0 {
                    Transport::Spdy("v4.channel.k8s.io")
                } else {
                    Transport::Ws("v5.channel.k8s.io")
                };
                let path = exec_path(&agent, "app", &["sh", "-c", &format!("sleep 1; echo n{i}")]);
                tokio::spawn(async move { (i, run(&client, transport, &path, OUT, None).await) })
            })
            .collect();
        for handle in runs {
            let (i, outcome) = handle.await.unwrap();
            assert_eq!(outcome.stdout(), format!("n{i}\n"), "{outcome:?}");
        }
    });
}

/// A SPDY peer sending garbage after the upgrade has its connection closed, and the agent goes
/// on serving; a WebSocket client that disconnects mid `sleep 600` has the process killed.
#[test]
fn garbage_and_disconnects_leave_nothing_behind() {
    let (agent, _manifests, pki) = start("exec-abuse");
    let client = pki.client(agent.ports().kubelet).unwrap();
    runtime().block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tls = client.connect().await.unwrap();
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n",
            exec_path(&agent, "app", &["true"]) + "&output=1"
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(&[0x80, 0x03, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 0xde, 0xad, 0xbe, 0xef])
            .await
            .unwrap();
        let mut all = Vec::new();
        let read = tokio::time::timeout(END, tls.read_to_end(&mut all)).await;
        assert!(read.is_ok(), "the agent closes a connection that sent garbage");
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 101"), "{text}");

        let echo = run(
            &client,
            Transport::Spdy("v4.channel.k8s.io"),
            &exec_path(&agent, "app", &["echo", "still", "serving"]),
            OUT,
            None,
        )
        .await;
        assert_eq!(echo.stdout(), "still serving\n");

        let mut sleeper = Remote::start(
            &client,
            Transport::Ws("v5.channel.k8s.io"),
            &exec_path(&agent, "app", &["sleep", "600"]),
            OUT,
        )
        .await
        .unwrap();
        let app = agent
            .containers()
            .into_iter()
            .find(|c| c.kube_name() == "app")
            .expect("the app container")
            .id
            .clone();
        wait_until("sleep 600 runs", CHANGE_TIMEOUT, || {
            let top = docker_ok(&["top", &app]);
            top.contains("sleep 600").then_some(()).ok_or(top)
        });
        assert!(!sleeper.read_until(Duration::from_millis(200), |o| !o.error.is_empty()).await);
        sleeper.disconnect();
        wait_until("sleep 600 is killed", CHANGE_TIMEOUT, || {
            let top = docker_ok(&["top", &app]);
            (!top.contains("sleep 600")).then_some(()).ok_or(top)
        });
    });
}
