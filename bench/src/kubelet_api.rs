//! P8: the kubelet API (issue 12), on one agent in API-server mode against the in-memory test
//! API server (`dockerlet-fake-apiserver`, TLS, in the bench process), beside raw Docker in the
//! same run:
//! - `kubectl exec p8 -c app -- true` through the API server's kubelet proxy and the agent,
//!   against `docker exec <container> true` (the docker CLI), alternating; and each CLI's
//!   start-up alone (`kubectl version --client`, `docker --version`), the part of the ratio
//!   neither the agent nor Docker has a say in;
//! - the same exec on the kubelet API directly (SPDY/3.1, `v4.channel.k8s.io`, the integration
//!   tests' streaming client: no kubectl start-up, no API server), against bollard's exec
//!   (create, start and drain, inspect);
//! - `POST /run/default/p8/app?cmd=true` over one keep-alive HTTPS connection;
//! - `kubectl logs` of a container that wrote a bounded log as fast as it could, against
//!   `docker logs` of the same container (the same log file);
//! - the agent's RSS with 100 idle `follow=true` log streams open, against none.
//!
//! The agent trusts two client CAs (`--client-ca-file` holds both): the API server's kubelet
//! client CA, as `integration-tests/tests/kubectl_exec.rs` starts it, and the bench's own
//! ([`ClientPki`], user `alice`, allowed everything by a SubjectAccessReview rule).

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::ListContainersOptions;
use bollard::Docker;
use dockerlet_fake_apiserver::{AccessRule, ApiServer, ApiServerConfig, KUBECTL};
use dockerlet_integration_tests::kubelet_stream::{ClientPki, KubeletClient, Remote, Streams, Transport};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::api_burst::wait_watching;
use crate::engine::{CONTAINER_NAME_LABEL, NODE_LABEL, POD_NAME_LABEL};
use crate::report::{mib, ms, Report};
use crate::scenarios::Ctx;
use crate::stats::{round3, Samples};
use crate::sys;

/// The pod of the exec, `/run` and follow measurements.
const POD: &str = "p8";
/// The pod whose container writes the log read back.
const LOGS_POD: &str = "p8-logs";
/// The line it ends its log with, once the bounded part is written.
const LOGS_DONE: &str = "p8-logs-done";
/// The length of each line the writer repeats, newline included.
const LINE_LEN: usize = 128;
/// How long a pod may take to run, an exec to end, the log to be written.
const POD_TIMEOUT: Duration = Duration::from_secs(120);
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
const WRITE_TIMEOUT: Duration = Duration::from_secs(600);
/// The target: kubectl exec over docker exec, at p50.
const EXEC_RATIO: f64 = 1.2;
/// The bench's client of the kubelet API (`ClientPki`'s certificate).
const BENCH_USER: &str = "alice";
/// Quiet time before each RSS reading.
const RSS_SETTLE: Duration = Duration::from_secs(3);

/// The app container: prints one line (so a follow stream has its first chunk at once), then
/// sleeps, leaving at once on SIGTERM.
const APP_CMD: &[&str] = &["sh", "-c", "echo ready; trap 'exit 0' TERM; sleep 3600 & wait"];

/// The writer's command: `bytes` (a multiple of [`LINE_LEN`]) of 128-byte lines as fast as
/// `yes` writes them, cut by `head -c`, then [`LOGS_DONE`], then sleep.
fn writer_cmd(bytes: usize) -> Vec<String> {
    let line = "x".repeat(LINE_LEN - 1);
    vec![
        "sh".into(),
        "-c".into(),
        format!("yes {line} | head -c {bytes}; echo {LOGS_DONE}; trap 'exit 0' TERM; sleep 3600 & wait"),
    ]
}

/// `mib` MiB rounded down to whole lines.
fn log_bytes(mib: usize) -> usize {
    (mib << 20) / LINE_LEN * LINE_LEN
}

/// What the whole log holds: the lines and the closing line.
fn expected_log_len(bytes: usize) -> usize {
    bytes + LOGS_DONE.len() + 1
}

/// MB (10⁶ bytes) per second.
fn mb_per_s(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs
}

/// The RSS difference per stream in KiB (negative if the RSS fell).
fn per_stream_kib(before_kb: u64, with_kb: u64, streams: usize) -> f64 {
    (with_kb as f64 - before_kb as f64) / streams.max(1) as f64
}

fn pod_spec(name: &str, node: &str, container: &str, cmd: &[String]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": container,
                "image": crate::engine::BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": cmd,
            }],
        },
    })
}

/// A complete HTTP/1.1 response at the start of `buf`: its status and its length, head and
/// `Content-Length` body; `None` while incomplete. A response without `Content-Length` cannot
/// end on a keep-alive connection here and is an error.
fn complete_response(buf: &[u8]) -> anyhow::Result<Option<(u16, usize)>> {
    let Some((status, head_len, headers)) = response_head(buf)? else {
        return Ok(None);
    };
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>())
        .transpose()
        .context("a Content-Length that is not a number")?
        .with_context(|| format!("HTTP {status} without Content-Length ({headers:?})"))?;
    Ok((buf.len() >= head_len + length).then_some((status, head_len + length)))
}

type Headers = Vec<(String, String)>;

/// The head of an HTTP/1.1 response at the start of `buf`: status, head length, headers;
/// `None` while incomplete.
fn response_head(buf: &[u8]) -> anyhow::Result<Option<(u16, usize, Headers)>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf).context("a malformed HTTP response")? {
        httparse::Status::Partial => Ok(None),
        httparse::Status::Complete(len) => {
            let headers = response
                .headers
                .iter()
                .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                .collect();
            Ok(Some((response.code.unwrap_or_default(), len, headers)))
        }
    }
}

/// Sends `request` on a keep-alive connection and reads its whole response (`Content-Length`);
/// the status and body. `buf` keeps bytes read past it (none with one request at a time).
async fn keep_alive_request<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
    buf: &mut Vec<u8>,
    request: &str,
) -> anyhow::Result<(u16, Vec<u8>)> {
    conn.write_all(request.as_bytes()).await.context("send a request")?;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((status, len)) = complete_response(buf)? {
            let (_, head_len, _) = response_head(buf)?.context("a response head")?;
            let body = buf[head_len..len].to_vec();
            buf.drain(..len);
            return Ok((status, body));
        }
        let n = conn.read(&mut chunk).await.context("read a response")?;
        if n == 0 {
            bail!("the connection closed before the response ended ({} bytes)", buf.len());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A TLS connection with a `GET path` sent and its response head read (200 required); the
/// connection is then held, its body unread.
async fn open_stream(client: &KubeletClient, path: &str) -> anyhow::Result<impl Sized> {
    let mut conn = client.connect().await.context("connect to the kubelet API")?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((status, _, _)) = response_head(&buf)? {
            if status != 200 {
                bail!("GET {path}: HTTP {status}: {}", String::from_utf8_lossy(&buf));
            }
            return Ok(conn);
        }
        let n = tokio::time::timeout(Duration::from_secs(30), conn.read(&mut chunk))
            .await
            .context("no response head within 30 s")??;
        if n == 0 {
            bail!("GET {path}: the connection closed before the response head");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The ID of the container `container` of pod `pod` on `node`.
async fn container_id(docker: &Docker, node: &str, pod: &str, container: &str) -> anyhow::Result<String> {
    let labels = vec![
        format!("{NODE_LABEL}={node}"),
        format!("{POD_NAME_LABEL}={pod}"),
        format!("{CONTAINER_NAME_LABEL}={container}"),
    ];
    let options = ListContainersOptions {
        filters: Some([("label".to_string(), labels)].into()),
        ..Default::default()
    };
    let list = docker.list_containers(Some(options)).await.context("list containers")?;
    list.into_iter()
        .find_map(|c| c.id)
        .with_context(|| format!("no running container {container} of pod {pod}"))
}

/// bollard's exec of `true`: create, start (attached, output drained), inspect; the exit code.
async fn bollard_exec(docker: &Docker, id: &str) -> anyhow::Result<i64> {
    let options = CreateExecOptions {
        cmd: Some(vec!["true".to_string()]),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker.create_exec(id, options).await.context("create an exec")?.id;
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&exec, None).await.context("start an exec")?
    {
        while let Some(chunk) = output.next().await {
            chunk.context("read the exec's output")?;
        }
    }
    let inspected = docker.inspect_exec(&exec).await.context("inspect an exec")?;
    Ok(inspected.exit_code.unwrap_or(-1))
}

/// The exec of `true` on the kubelet API over SPDY (stdout and stderr, no stdin): succeeded?
async fn kubelet_exec(client: &KubeletClient, pod: &str) -> anyhow::Result<()> {
    let streams = Streams {
        stdout: true,
        stderr: true,
        ..Streams::default()
    };
    let path = format!("/exec/default/{pod}/app?command=true");
    let remote = Remote::start(client, Transport::Spdy("v4.channel.k8s.io"), &path, streams).await?;
    let outcome = remote.finish(EXEC_TIMEOUT).await?;
    if outcome.status()["status"] != "Success" {
        bail!("the kubelet API's exec of true: {outcome:?}");
    }
    Ok(())
}

/// Runs `cmd` to its end with stdout read and counted; the time and the byte count.
fn timed_command(mut cmd: Command) -> anyhow::Result<(Duration, usize)> {
    let began = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("run {cmd:?}"))?;
    let mut stdout = child.stdout.take().context("stdout")?;
    let mut count = 0;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        let n = stdout.read(&mut chunk).context("read stdout")?;
        if n == 0 {
            break;
        }
        count += n;
    }
    let out = child.wait_with_output().context("wait")?;
    let took = began.elapsed();
    if !out.status.success() {
        bail!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((took, count))
}

fn kubectl(api: &ApiServer, args: &[&str]) -> Command {
    let mut cmd = Command::new(KUBECTL);
    cmd.arg("--kubeconfig")
        .arg(api.kubeconfig_path())
        .arg("--cache-dir")
        .arg(api.dir().join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG");
    cmd
}

fn docker_cli(args: &[&str]) -> Command {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    cmd
}

/// Waits for pod `name` to be Running in the API.
fn wait_running(api: &ApiServer, name: &str) -> anyhow::Result<()> {
    let began = Instant::now();
    while !api
        .get("pods", "default", name)
        .is_some_and(|p| p["status"]["phase"] == "Running")
    {
        if began.elapsed() > POD_TIMEOUT {
            bail!("pod {name} not Running after {POD_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// The agent's VmRSS in kB: the median of 5 readings 200 ms apart, after [`RSS_SETTLE`].
fn settled_rss(pid: u32) -> Option<u64> {
    std::thread::sleep(RSS_SETTLE);
    let mut readings = Vec::new();
    for _ in 0..5 {
        readings.extend(sys::status_kb(pid, "VmRSS"));
        std::thread::sleep(Duration::from_millis(200));
    }
    readings.sort_unstable();
    readings.get(readings.len() / 2).copied()
}

/// Two series measured alternately, `runs` times each (which goes first alternates).
fn alternate(
    runs: usize,
    mut a: impl FnMut() -> anyhow::Result<Duration>,
    mut b: impl FnMut() -> anyhow::Result<Duration>,
) -> anyhow::Result<(Samples, Samples)> {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            xs.push(a()?);
            ys.push(b()?);
        } else {
            ys.push(b()?);
            xs.push(a()?);
        }
    }
    Ok((Samples::from_durations(&xs), Samples::from_durations(&ys)))
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.2}×"))
}

fn p50_p99(s: &Samples) -> String {
    match s.p50_p99() {
        Some((p50, p99)) => format!("{} / {}", ms(Some(p50)), ms(Some(p99))),
        None => "n/a".into(),
    }
}

/// P8.
pub fn kubelet_api(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let s = &ctx.settings;
    let pki = ClientPki::new().context("make the bench's client certificate")?;
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        ..ApiServerConfig::default()
    })
    .context("start the in-memory API server")?;
    api.add_access_rule(AccessRule::allow().user(BENCH_USER));
    let cas = api.dir().join("p8-client-cas.crt");
    let bundle = std::fs::read_to_string(api.kubelet_client_ca_path()).context("the API server's kubelet client CA")?
        + &std::fs::read_to_string(&pki.ca).context("the bench's client CA")?;
    std::fs::write(&cas, bundle).context("write the client CA bundle")?;
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let cas_arg = cas.display().to_string();
    let agent = ctx.start_agent(
        "p8",
        &[
            "--kubeconfig",
            &kubeconfig,
            "--node-ip",
            "127.0.0.1",
            "--client-ca-file",
            &cas_arg,
            // The scenario reads a 200 MiB log whole; at kubelet's default rotation (10Mi, 5
            // files) Docker keeps only the last ~50 MiB of it.
            "--container-log-max-size",
            "512Mi",
        ],
    )?;
    let pid = agent.pid().context("the agent's PID")?;
    let node = agent.node().to_string();
    wait_watching(&api, &node)?;
    let app_cmd: Vec<String> = APP_CMD.iter().map(|c| c.to_string()).collect();
    api.create(pod_spec(POD, &node, "app", &app_cmd))
        .context("create the pod")?;
    wait_running(&api, POD)?;
    let app = ctx.rt.block_on(container_id(&ctx.docker, &node, POD, "app"))?;
    let client = pki.client(agent.kubelet_port()).context("the kubelet API client")?;

    // Exec through kubectl and the API server, against the docker CLI; a warm-up of each first
    // (kubectl's discovery cache, the agent's authorization cache).
    let kubectl_exec = || -> anyhow::Result<Duration> {
        Ok(timed_command(kubectl(&api, &["exec", POD, "-c", "app", "--", "true"]))?.0)
    };
    let docker_exec = || -> anyhow::Result<Duration> { Ok(timed_command(docker_cli(&["exec", &app, "true"]))?.0) };
    kubectl_exec().context("kubectl exec (warm-up)")?;
    docker_exec().context("docker exec (warm-up)")?;
    let (kubectl_s, docker_s) = alternate(s.kubelet_exec_runs, kubectl_exec, docker_exec)?;
    eprintln!(
        "  P8 kubectl exec {} │ docker exec {}",
        p50_p99(&kubectl_s),
        p50_p99(&docker_s)
    );

    // Each CLI's own start-up, no request: what the exec ratio carries that neither the agent
    // nor Docker does.
    let kubectl_start =
        || -> anyhow::Result<Duration> { Ok(timed_command(kubectl(&api, &["version", "--client"]))?.0) };
    let docker_start = || -> anyhow::Result<Duration> { Ok(timed_command(docker_cli(&["--version"]))?.0) };
    kubectl_start().context("kubectl version --client (warm-up)")?;
    docker_start().context("docker --version (warm-up)")?;
    let (kubectl_start_s, docker_start_s) = alternate(s.kubelet_exec_runs, kubectl_start, docker_start)?;

    // The same on the kubelet API directly (SPDY), against bollard.
    let spdy_exec = || -> anyhow::Result<Duration> {
        let began = Instant::now();
        ctx.rt.block_on(kubelet_exec(&client, POD))?;
        Ok(began.elapsed())
    };
    let docker_api_exec = || -> anyhow::Result<Duration> {
        let began = Instant::now();
        let code = ctx.rt.block_on(bollard_exec(&ctx.docker, &app))?;
        if code != 0 {
            bail!("bollard's exec of true exited {code}");
        }
        Ok(began.elapsed())
    };
    spdy_exec().context("the kubelet API's exec (warm-up)")?;
    docker_api_exec().context("bollard's exec (warm-up)")?;
    let (spdy_s, bollard_s) = alternate(s.kubelet_exec_runs, spdy_exec, docker_api_exec)?;
    eprintln!(
        "  P8 kubelet API exec {} │ bollard exec {}",
        p50_p99(&spdy_s),
        p50_p99(&bollard_s)
    );

    // /run over one keep-alive connection.
    let run_s = ctx.rt.block_on(async {
        let mut conn = client.connect().await.context("connect to the kubelet API")?;
        let request =
            format!("POST /run/default/{POD}/app?cmd=true HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
        let mut buf = Vec::new();
        let mut times = Vec::new();
        for i in 0..=s.kubelet_run_requests {
            let began = Instant::now();
            let (status, body) = keep_alive_request(&mut conn, &mut buf, &request).await?;
            if status != 200 {
                bail!("POST /run: HTTP {status}: {}", String::from_utf8_lossy(&body));
            }
            if i > 0 {
                times.push(began.elapsed());
            }
        }
        anyhow::Ok(Samples::from_durations(&times))
    })?;
    eprintln!("  P8 /run {}", p50_p99(&run_s));

    // The log: written first, then read whole, by kubectl and by docker logs.
    let bytes = log_bytes(s.kubelet_log_mib);
    api.create(pod_spec(LOGS_POD, &node, "writer", &writer_cmd(bytes)))
        .context("create the log writer")?;
    wait_running(&api, LOGS_POD)?;
    let writer = ctx.rt.block_on(container_id(&ctx.docker, &node, LOGS_POD, "writer"))?;
    let began = Instant::now();
    loop {
        let out = docker_cli(&["logs", "--tail", "1", &writer])
            .output()
            .context("docker logs --tail 1")?;
        if String::from_utf8_lossy(&out.stdout).trim() == LOGS_DONE {
            break;
        }
        if began.elapsed() > WRITE_TIMEOUT {
            bail!("the writer had not written its {bytes} bytes after {WRITE_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let written_s = began.elapsed().as_secs_f64();
    let expected = expected_log_len(bytes);
    let read_log = |cmd: Command, who: &str| -> anyhow::Result<Duration> {
        let (took, count) = timed_command(cmd)?;
        if count != expected {
            bail!("{who} read {count} bytes of the log, not {expected}");
        }
        Ok(took)
    };
    let (kubectl_logs, docker_logs) = alternate(
        s.kubelet_log_reps,
        || read_log(kubectl(&api, &["logs", LOGS_POD, "-c", "writer"]), "kubectl logs"),
        || read_log(docker_cli(&["logs", &writer]), "docker logs"),
    )?;
    let rate = |t: &Samples| t.median().map(|t| (mb_per_s(expected, t), t));
    let (agent_rate, docker_rate) = (rate(&kubectl_logs), rate(&docker_logs));
    let rate_text = |r: Option<(f64, f64)>| r.map_or("n/a".into(), |(mbs, t)| format!("{mbs:.1} MB/s ({t:.2} s)"));
    eprintln!(
        "  P8 log of {expected} bytes written in {written_s:.1} s; kubectl logs {} │ docker logs {}",
        rate_text(agent_rate),
        rate_text(docker_rate)
    );

    // RSS with no follow streams, then with them open and idle.
    let before_kb = settled_rss(pid);
    let follow = format!("/containerLogs/default/{POD}/app?follow=true");
    let streams = ctx.rt.block_on(async {
        let opened = futures::stream::iter(0..s.follow_streams)
            .map(|_| open_stream(&client, &follow))
            .buffer_unordered(10)
            .collect::<Vec<_>>()
            .await;
        opened.into_iter().collect::<anyhow::Result<Vec<_>>>()
    })?;
    let with_kb = settled_rss(pid);
    let alive = sys::status_kb(pid, "VmRSS").is_some();
    drop(streams);
    if !alive {
        bail!("the agent died with {} follow streams open", s.follow_streams);
    }

    ctx.finish_agent(agent)?;
    drop(api);

    let scenario = "P8";
    let ratio = |a: &Samples, b: &Samples| a.median().zip(b.median()).map(|(a, b)| a / b);
    let exec_ratio = ratio(&kubectl_s, &docker_s);
    report.row(
        scenario,
        &format!(
            "`kubectl exec -- true` (through the API server) │ `docker exec true`, p50 / p99 ({} runs)",
            kubectl_s.len()
        ),
        p50_p99(&kubectl_s),
        p50_p99(&docker_s),
    );
    report.target_row(
        "P8",
        scenario,
        "kubectl exec / docker exec at p50",
        ratio_text(exec_ratio),
        String::new(),
        "≤ 1.2×",
        exec_ratio,
        EXEC_RATIO,
    );
    report.row(
        scenario,
        &format!(
            "each CLI's start-up alone (`kubectl version --client` │ `docker --version`), p50 / p99 ({} runs)",
            kubectl_start_s.len()
        ),
        p50_p99(&kubectl_start_s),
        p50_p99(&docker_start_s),
    );
    let beyond = |a: &Samples, floor: &Samples| a.median().zip(floor.median()).map(|(a, f)| a - f);
    let (kubectl_beyond, docker_beyond) = (beyond(&kubectl_s, &kubectl_start_s), beyond(&docker_s, &docker_start_s));
    report.row(
        scenario,
        "exec beyond its CLI's start-up at p50 (kubectl │ docker); their ratio",
        format!(
            "{}; {}",
            ms(kubectl_beyond),
            ratio_text(kubectl_beyond.zip(docker_beyond).map(|(k, d)| k / d))
        ),
        ms(docker_beyond),
    );
    let api_ratio = ratio(&spdy_s, &bollard_s);
    report.row(
        scenario,
        &format!(
            "exec of `true` on the kubelet API (SPDY, no kubectl) │ bollard's exec (create+start+inspect), p50 / p99 ({} runs); agent / bollard at p50",
            spdy_s.len()
        ),
        format!(
            "{}; {}",
            p50_p99(&spdy_s),
            ratio_text(api_ratio)
        ),
        p50_p99(&bollard_s),
    );
    report.row(
        scenario,
        &format!(
            "`POST /run/…?cmd=true`, keep-alive HTTPS, p50 / p99 ({} requests)",
            run_s.len()
        ),
        p50_p99(&run_s),
        String::new(),
    );
    report.row(
        scenario,
        &format!(
            "`kubectl logs` (whole log, {:.0} MB of 128-byte lines) │ `docker logs`, median of {}",
            expected as f64 / 1e6,
            kubectl_logs.len()
        ),
        rate_text(agent_rate),
        rate_text(docker_rate),
    );
    let streams_n = s.follow_streams;
    let rss_text = match (before_kb, with_kb) {
        (Some(b), Some(w)) => format!(
            "{} │ {} │ {:.1} KiB",
            mib(Some(b)),
            mib(Some(w)),
            per_stream_kib(b, w, streams_n)
        ),
        _ => "n/a".into(),
    };
    report.row(
        scenario,
        &format!("agent RSS: no follow streams │ {streams_n} idle `follow=true` log streams │ per stream"),
        rss_text,
        String::new(),
    );
    report.figures(
        "p8_kubelet_api",
        json!({
            "kubectl_exec": kubectl_s.json_ms(),
            "docker_exec": docker_s.json_ms(),
            "kubectl_over_docker_p50": exec_ratio.map(round3),
            "kubectl_version_client": kubectl_start_s.json_ms(),
            "docker_version_flag": docker_start_s.json_ms(),
            "kubelet_spdy_exec": spdy_s.json_ms(),
            "bollard_exec": bollard_s.json_ms(),
            "kubelet_over_bollard_p50": api_ratio.map(round3),
            "run": run_s.json_ms(),
            "log_bytes": expected,
            "log_written_s": round3(written_s),
            "kubectl_logs_mb_s": agent_rate.map(|r| round3(r.0)),
            "docker_logs_mb_s": docker_rate.map(|r| round3(r.0)),
            "kubectl_logs_s": kubectl_logs.json_ms(),
            "docker_logs_s": docker_logs.json_ms(),
            "follow_streams": streams_n,
            "rss_kb_no_streams": before_kb,
            "rss_kb_with_streams": with_kb,
            "rss_kib_per_stream": before_kb.zip(with_kb).map(|(b, w)| round3(per_stream_kib(b, w, streams_n))),
        }),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer's log is whole lines, then the closing line; its command says so.
    #[test]
    fn the_writer_writes_whole_lines_then_the_closing_line() {
        let bytes = log_bytes(200);
        assert_eq!(bytes, 200 << 20);
        assert_eq!(log_bytes(1) % LINE_LEN, 0);
        assert_eq!(expected_log_len(bytes), (200 << 20) + "p8-logs-done\n".len());
        let cmd = writer_cmd(1024);
        assert_eq!(&cmd[..2], ["sh", "-c"]);
        assert!(
            cmd[2].starts_with(&format!("yes {} | head -c 1024; echo p8-logs-done;", "x".repeat(127))),
            "{cmd:?}"
        );
    }

    /// Rates and per-stream differences.
    #[test]
    fn rates_and_per_stream_figures() {
        assert_eq!(mb_per_s(200_000_000, 2.0), 100.0);
        assert_eq!(per_stream_kib(10_000, 12_000, 100), 20.0);
        assert_eq!(per_stream_kib(12_000, 10_000, 100), -20.0);
        assert_eq!(per_stream_kib(1, 2, 0), 1.0);
    }

    /// A response is complete once its head and Content-Length body are in; bytes after it
    /// are the next one's.
    #[test]
    fn responses_end_at_their_content_length() {
        let one = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc";
        assert_eq!(complete_response(&one[..10]).unwrap(), None);
        assert_eq!(complete_response(&one[..one.len() - 1]).unwrap(), None);
        assert_eq!(complete_response(one).unwrap(), Some((200, one.len())));
        let mut two = one.to_vec();
        two.extend_from_slice(b"HTTP/1.1 500 Internal");
        assert_eq!(complete_response(&two).unwrap(), Some((200, one.len())));
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(complete_response(chunked).is_err());
        assert!(complete_response(b"garbage\r\n\r\n").is_err());
        let (status, len, headers) = response_head(chunked).unwrap().unwrap();
        assert_eq!((status, len), (200, chunked.len()));
        assert_eq!(headers[0].0, "transfer-encoding");
    }

    /// Keep-alive requests read one response each off the same connection.
    #[test]
    fn keep_alive_reads_one_response_per_request() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, mut server) = tokio::io::duplex(4096);
            let serve = tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut chunk = [0u8; 1024];
                for body in ["", "hello"] {
                    while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
                        let n = server.read(&mut chunk).await.unwrap();
                        seen.extend_from_slice(&chunk[..n]);
                    }
                    seen.clear();
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                    server.write_all(reply.as_bytes()).await.unwrap();
                }
            });
            let mut buf = Vec::new();
            let req = "POST /run HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
            assert_eq!(
                keep_alive_request(&mut client, &mut buf, req).await.unwrap(),
                (200, Vec::new())
            );
            assert_eq!(
                keep_alive_request(&mut client, &mut buf, req).await.unwrap(),
                (200, b"hello".to_vec())
            );
            assert!(buf.is_empty());
            serve.await.unwrap();
        });
    }

    /// Alternation: both series get every run.
    #[test]
    fn alternate_runs_both_series() {
        let (a, b) = alternate(3, || Ok(Duration::from_millis(2)), || Ok(Duration::from_millis(1))).unwrap();
        assert_eq!((a.len(), b.len()), (3, 3));
        assert_eq!(a.median(), Some(0.002));
    }
}
