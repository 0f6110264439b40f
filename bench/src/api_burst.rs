//! P1v: the P1 burst with API pods. N pods are created at once on the in-memory API server
//! (`dockerlet-fake-apiserver`), each with a ConfigMap volume of its own and the
//! `kube-api-access-*` projected volume (service-account token, `kube-root-ca.crt`, namespace)
//! that the server's ServiceAccount admission adds, as a real cluster does. The agent runs in
//! API-server mode (`--kubeconfig`). Beside it, a bollard baseline creates and starts the same
//! sandbox and app container per pod, the app bind-mounting host directories that hold the same
//! files.
//!
//! Each pod has its own ConfigMap (`p1v-cm-<i>`, created before the clock starts), so the agent
//! opens one watch per pod in its object cache: the stricter case, and the common one (ConfigMaps
//! are mostly per workload).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::{json, Value};

use crate::agent::count_pods;
use crate::engine::{self, distinct, now_nanos, Cleanup, Event, Watcher, BUSYBOX_IMAGE};
use crate::pods;
use crate::report::{secs, Report};
use crate::scenarios::{
    cpu_per_pod, cpu_seconds, cpu_seconds_json, pod_steps, since, steps_json, steps_since_t0, Ctx, Steps,
};
use crate::stats::{round3, Samples};
use crate::sys::{self, CpuUse, CpuWindow};

/// Where the app container sees its ConfigMap.
const CONFIG_MOUNT: &str = "/etc/bench-config";
/// Where the kube-api-access volume is mounted (by admission; the baseline mounts it there too).
const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The data of every pod's ConfigMap.
const CONFIG_DATA: &[(&str, &str)] = &[
    ("app.properties", "greeting=hello\nrepeat=3\nlog.level=info\n"),
    ("mode", "bench"),
];
/// This process's threads that serve the in-process API server, for its CPU: `test-apiserver`
/// (its system thread), `actix-server ac[ceptor]` and the workers (`actix-rt|system:0|arbiter:<n>`,
/// cut to `actix-rt|system`).
const API_THREADS: &[&str] = &["test-apiserver", "actix"];
/// How long an agent in API mode may take to register its Node and watch its pods.
const WATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The P1v target: (agent / baseline) of P1v over that of P1 at the same N in the same run.
const WITHIN_NOISE: f64 = 1.10;

fn config_map(i: usize) -> Value {
    let data: serde_json::Map<String, Value> = CONFIG_DATA.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("p1v-cm-{i}"), "namespace": "default"},
        "data": data,
    })
}

/// Pod `p1v-<i>` bound to `node`: busybox `sleep 3600` with ConfigMap `p1v-cm-<i>` mounted
/// read-only (admission adds the kube-api-access volume and its mount).
fn pod(i: usize, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("p1v-{i}"), "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "volumes": [{"name": "config", "configMap": {"name": format!("p1v-cm-{i}")}}],
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": pods::SLEEP_CMD,
                "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": true}],
            }],
        },
    })
}

/// Waits until the agent has registered its Node and watches its pods (so the clock does not
/// include the agent's start-up).
pub(crate) fn wait_watching(api: &ApiServer, node: &str) -> anyhow::Result<()> {
    let began = Instant::now();
    loop {
        let registered = api.get("nodes", "", node).is_some();
        let watching = api.requests().iter().any(|r| {
            r.method == "GET" && r.path == "/api/v1/pods" && r.query.contains("watch=true") && r.query.contains(node)
        });
        if registered && watching {
            return Ok(());
        }
        if began.elapsed() > WATCH_TIMEOUT {
            bail!("the agent did not register its Node (registered: {registered}) and watch its pods (watching: {watching}) within {WATCH_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `cat <CONFIG_MOUNT>/mode` in the app container of `pod`: the volume is really there.
fn check_volume(events: &[Event], pod: &str) -> anyhow::Result<()> {
    let id = events
        .iter()
        .find(|e| e.pod == pod && e.container == "main" && e.action == "start")
        .map(|e| e.id.clone())
        .with_context(|| format!("no app container of {pod}"))?;
    let out = Command::new("docker")
        .args([
            "exec",
            &id,
            "cat",
            &format!("{CONFIG_MOUNT}/mode"),
            &format!("{TOKEN_MOUNT}/namespace"),
        ])
        .stdin(Stdio::null())
        .output()
        .context("docker exec")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text != "benchdefault" {
        bail!(
            "{pod}: the volumes hold {text:?} ({}; {})",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// One agent run.
struct AgentRun {
    /// Seconds until Docker runs all 2·N containers.
    docker_s: f64,
    /// Until the API shows all N pods Running.
    api_s: f64,
    /// Until the agent's `/pods` does.
    pods_s: f64,
    steps: Vec<Steps>,
    cpu: CpuUse,
    /// CPU-seconds of the in-process API server's threads over the window.
    api_cpu_s: f64,
}

fn burst_agent(ctx: &Ctx, n: usize) -> anyhow::Result<AgentRun> {
    let api = ApiServer::start_with(ApiServerConfig::default()).context("start the in-memory API server")?;
    for i in 0..n {
        api.create(config_map(i)).context("create a ConfigMap")?;
    }
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = ctx.start_agent(&format!("p1vn{n}"), &["--kubeconfig", &kubeconfig])?;
    wait_watching(&api, agent.node())?;
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &agent.label());
    let specs: Vec<Value> = (0..n).map(|i| pod(i, agent.node())).collect();
    let cpu = CpuWindow::start(agent.pid());
    let api_ticks = sys::own_threads_ticks(API_THREADS);
    let t0 = now_nanos();
    let began = Instant::now();
    for spec in specs {
        let created = api.create(spec).context("create a pod")?;
        let admitted = created["spec"]["volumes"].as_array().is_some_and(|vs| {
            vs.iter()
                .any(|v| v["name"].as_str().is_some_and(|n| n.starts_with("kube-api-access-")))
        });
        if !admitted {
            bail!("the API server admitted a pod without the kube-api-access volume: {created}");
        }
    }
    let timeout = Duration::from_secs(120 + 3 * n as u64);
    let (mut on_docker, mut on_api, mut on_pods) = (None, None, None);
    while on_docker.is_none() || on_api.is_none() || on_pods.is_none() {
        if began.elapsed() > timeout {
            bail!(
                "P1v N={n}: not all running after {timeout:?} (docker: {on_docker:?}, API: {on_api:?}, /pods: {on_pods:?}); log: {}",
                agent.log_path().display()
            );
        }
        if on_docker.is_none() {
            let events = watcher.snapshot();
            let starts = distinct(&events, "start", |_| true);
            if starts.len() >= 2 * n {
                on_docker = starts.values().max().map(|t| since(t0, *t));
            }
        }
        if on_api.is_none() && count_pods(&api.list("pods"), "p1v-").running >= n {
            on_api = Some(began.elapsed().as_secs_f64());
        }
        if on_pods.is_none() {
            if let Ok(items) = agent.pods() {
                if count_pods(&items, "p1v-").running >= n {
                    on_pods = Some(began.elapsed().as_secs_f64());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu = cpu.finish();
    let api_cpu_s = sys::own_threads_ticks(API_THREADS).saturating_sub(api_ticks) as f64 / sys::ticks_per_second();
    let events = watcher.snapshot();
    let steps = (0..n)
        .filter_map(|i| pod_steps(&events, &format!("p1v-{i}"), t0))
        .collect();
    check_volume(&events, &format!("p1v-{}", n - 1))?;
    drop(watcher);
    ctx.finish_agent(agent)?;
    drop(api);
    Ok(AgentRun {
        docker_s: on_docker.unwrap_or_default(),
        api_s: on_api.unwrap_or_default(),
        pods_s: on_pods.unwrap_or_default(),
        steps,
        cpu,
        api_cpu_s,
    })
}

/// The baseline's volumes of one pod under `dir`: the ConfigMap's files, and a token, a CA and
/// the namespace as the kube-api-access volume holds them; returns the binds.
fn write_volumes(dir: &Path) -> anyhow::Result<Vec<String>> {
    let config = dir.join("config");
    let token = dir.join("kube-api-access");
    for d in [&config, &token] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    for (key, value) in CONFIG_DATA {
        std::fs::write(config.join(key), value).context("write a ConfigMap file")?;
    }
    // Sizes as the fake API server's: an ES256 JWT of about 1 kB, a PEM certificate.
    let files = [
        ("token", "e".repeat(1000)),
        (
            "ca.crt",
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                "M".repeat(560)
            ),
        ),
        ("namespace", "default".to_string()),
    ];
    for (name, content) in files {
        std::fs::write(token.join(name), content).context("write a token volume file")?;
    }
    Ok(vec![
        format!("{}:{CONFIG_MOUNT}:ro", config.display()),
        format!("{}:{TOKEN_MOUNT}:ro", token.display()),
    ])
}

/// One baseline run: per pod, write the volume files, create and start the sandbox, create and
/// start the app container with the binds; all pods at once.
fn burst_baseline(ctx: &Ctx, n: usize, rep: usize) -> anyhow::Result<(f64, Vec<Steps>, CpuUse)> {
    let labels = ctx.baseline_labels(&format!("p1vn{n}r{rep}"));
    let _cleanup = Cleanup::new(labels.filter());
    let dir = tempfile::Builder::new()
        .prefix("dockerlet-bench-p1v-")
        .tempdir()
        .context("create the baseline's volume directory")?;
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &labels.filter());
    let cpu = CpuWindow::start(None);
    let t0 = now_nanos();
    let results = ctx.rt.block_on(futures::future::join_all((0..n).map(|i| {
        let pod = format!("p1v-{i}-{}", labels.run);
        let (labels, docker, root) = (&labels, &ctx.docker, dir.path());
        async move {
            let binds = write_volumes(&root.join(&pod))?;
            engine::baseline_pod_with_binds(docker, labels, &pod, pods::SLEEP_CMD, &binds).await
        }
    })));
    for r in results {
        r?;
    }
    let starts = watcher.wait("baseline start events", Duration::from_secs(60), |events| {
        let s = distinct(events, "start", |_| true);
        (s.len() >= 2 * n).then(|| s.values().copied().max().unwrap_or(t0))
    })?;
    let cpu = cpu.finish();
    let events = watcher.snapshot();
    let steps = (0..n)
        .filter_map(|i| pod_steps(&events, &format!("p1v-{i}-{}", labels.run), t0))
        .collect();
    check_volume(&events, &format!("p1v-{}-{}", n - 1, labels.run))?;
    drop(watcher);
    ctx.rt
        .block_on(engine::remove_labelled(&ctx.docker, &labels.filter()))?;
    Ok((since(t0, starts), steps, cpu))
}

/// P1's medians at `n` in this run, if P1 ran at that size: the agent's time on Docker and
/// agent / baseline.
fn p1_at(report: &Report, n: usize) -> Option<(f64, f64)> {
    let runs = report.scenarios.get("p1_burst_start")?.as_array()?;
    let p1 = runs.iter().find(|r| r["n"] == n)?;
    Some((p1["agent_docker_median_s"].as_f64()?, p1["ratio"].as_f64()?))
}

/// P1v for every size: agent and baseline alternate which goes first.
pub fn burst_api(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let mut figures = Vec::new();
    for &n in &ctx.settings.api_burst_sizes {
        let (mut agent, mut base, mut base_steps, mut base_cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for rep in 0..ctx.settings.api_burst_reps {
            let mut run_agent = || -> anyhow::Result<()> {
                let r = burst_agent(ctx, n)?;
                eprintln!(
                    "  P1v N={n} rep {rep}: agent {:.2} s on Docker, {:.2} s in the API, {:.2} s on /pods",
                    r.docker_s, r.api_s, r.pods_s
                );
                agent.push(r);
                Ok(())
            };
            let mut run_base = || -> anyhow::Result<()> {
                let (b, steps, cpu) = burst_baseline(ctx, n, rep)?;
                eprintln!("  P1v N={n} rep {rep}: baseline {b:.2} s");
                base.push(b);
                base_steps.extend(steps);
                base_cpu.push(cpu);
                Ok(())
            };
            if rep % 2 == 0 {
                run_agent()?;
                run_base()?;
            } else {
                run_base()?;
                run_agent()?;
            }
        }
        let median = |f: fn(&AgentRun) -> f64| Samples::new(agent.iter().map(f).collect()).median();
        let (a, api_s, pods_s) = (median(|r| r.docker_s), median(|r| r.api_s), median(|r| r.pods_s));
        let b = Samples::new(base.clone()).median();
        let agent_steps: Vec<Steps> = agent.iter().flat_map(|r| r.steps.iter().copied()).collect();
        let agent_cpu: Vec<CpuUse> = agent.iter().map(|r| r.cpu).collect();
        let api_cpu = Samples::new(agent.iter().map(|r| r.api_cpu_s / n as f64).collect()).median();
        let ratio = a.zip(b).map(|(a, b)| a / b);
        let rate = |t: Option<f64>| t.map_or("n/a".to_string(), |t| format!("{:.1} pods/s", n as f64 / t));
        let scenario = format!("P1v N={n}");
        report.row(
            &scenario,
            "all 2·N containers running (Docker)",
            format!("{} ({})", secs(a), rate(a)),
            format!("{} ({})", secs(b), rate(b)),
        );
        report.row(
            &scenario,
            "API: all N pods Running │ /pods: all N Running",
            format!("{} │ {}", secs(api_s), secs(pods_s)),
            String::new(),
        );
        report.row(
            &scenario,
            "p50 over pods, since created: sandbox created │ started │ app created │ started",
            steps_since_t0(&agent_steps),
            steps_since_t0(&base_steps),
        );
        report.row(
            &scenario,
            "CPU-seconds per pod during the burst: agent │ dockerd │ containerd+shims",
            cpu_per_pod(&agent_cpu, n),
            cpu_per_pod(&base_cpu, n),
        );
        report.row(
            &scenario,
            "CPU-seconds per pod of the in-process API server (bench threads)",
            api_cpu.map_or("n/a".to_string(), |c| format!("{:.1} ms", c * 1000.0)),
            String::new(),
        );
        let dockerd_ratio = match (cpu_seconds(&agent_cpu, n)[1], cpu_seconds(&base_cpu, n)[1]) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        report.row(
            &scenario,
            "dockerd CPU-seconds per pod, agent / baseline",
            dockerd_ratio.map_or("n/a".to_string(), |r| format!("{r:.2}")),
            String::new(),
        );
        report.row(
            &scenario,
            "agent / baseline",
            ratio.map_or("n/a".to_string(), |r| format!("{r:.2}")),
            String::new(),
        );
        let target = format!("within noise of P1: ≤ {WITHIN_NOISE:.2}");
        let measure = format!("agent / baseline, over P1 N={n}'s (this run); agent time over P1's");
        let p1 = p1_at(report, n);
        let against = p1
            .zip(ratio)
            .map(|((p1_time, p1_ratio), ratio)| (ratio / p1_ratio, a.map(|a| a / p1_time)));
        match against {
            Some((relative, time)) => report.target_row(
                "P1v",
                &scenario,
                &measure,
                format!(
                    "{relative:.2} ({:.2} / {:.2}); {}",
                    ratio.unwrap_or_default(),
                    p1.map_or(0.0, |p| p.1),
                    time.map_or("n/a".to_string(), |t| format!("{t:.2}"))
                ),
                String::new(),
                &target,
                Some(relative),
                WITHIN_NOISE,
            ),
            None => report.unjudged_row(
                "P1v",
                &scenario,
                &measure,
                format!("P1 not run at N={n} (BENCH_ONLY=p1,p1v)"),
                &target,
            ),
        }
        figures.push(json!({
            "n": n,
            "configmaps": "one per pod",
            "agent_docker_s": agent.iter().map(|r| round3(r.docker_s)).collect::<Vec<_>>(),
            "agent_api_running_s": agent.iter().map(|r| round3(r.api_s)).collect::<Vec<_>>(),
            "agent_pods_running_s": agent.iter().map(|r| round3(r.pods_s)).collect::<Vec<_>>(),
            "baseline_s": base,
            "agent_docker_median_s": a, "agent_api_running_median_s": api_s,
            "agent_pods_running_median_s": pods_s, "baseline_median_s": b,
            "ratio": ratio,
            "p1_same_n": p1.map(|(t, r)| json!({"agent_docker_median_s": t, "ratio": r})),
            "ratio_over_p1_ratio": against.map(|(r, _)| r),
            "agent_time_over_p1": against.and_then(|(_, t)| t),
            "agent_cpu_s_per_pod": cpu_seconds_json(&agent_cpu, n),
            "api_server_cpu_s_per_pod": api_cpu,
            "baseline_cpu_s_per_pod": cpu_seconds_json(&base_cpu, n),
            "agent_steps": steps_json(&agent_steps),
            "baseline_steps": steps_json(&base_steps),
        }));
    }
    report.figures("p1v_burst_start_api_volumes", json!(figures));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pod `i` mounts ConfigMap `i` read-only, is bound to the node, and runs `sleep 3600`.
    #[test]
    fn each_pod_mounts_its_own_config_map() {
        let p = pod(7, "node-a");
        assert_eq!(p["spec"]["nodeName"], "node-a");
        assert_eq!(
            p["spec"]["volumes"][0]["configMap"]["name"],
            config_map(7)["metadata"]["name"]
        );
        let mount = &p["spec"]["containers"][0]["volumeMounts"][0];
        assert_eq!(
            (mount["mountPath"].as_str(), mount["readOnly"].as_bool()),
            (Some(CONFIG_MOUNT), Some(true))
        );
        assert_eq!(p["spec"]["containers"][0]["command"], json!(["sleep", "3600"]));
        assert_eq!(config_map(7)["data"]["mode"], "bench");
    }

    /// The baseline's volume files are where its binds point, mounted read-only.
    #[test]
    fn baseline_volumes_hold_the_files_the_binds_mount() {
        let dir = tempfile::tempdir().expect("temp dir");
        let binds = write_volumes(&dir.path().join("p")).expect("write volumes");
        assert_eq!(binds.len(), 2);
        let config = binds[0]
            .strip_suffix(&format!(":{CONFIG_MOUNT}:ro"))
            .expect("config bind");
        assert_eq!(
            std::fs::read_to_string(Path::new(config).join("mode")).ok().as_deref(),
            Some("bench")
        );
        let token = binds[1]
            .strip_suffix(&format!(":{TOKEN_MOUNT}:ro"))
            .expect("token bind");
        assert_eq!(
            std::fs::read_to_string(Path::new(token).join("namespace"))
                .ok()
                .as_deref(),
            Some("default")
        );
    }

    /// P1's figures at the same N are found; another N is not.
    #[test]
    fn p1_figures_at_the_same_size() {
        let mut report = Report::default();
        report.figures(
            "p1_burst_start",
            json!([{"n": 30, "agent_docker_median_s": 5.0, "ratio": 1.02}, {"n": 10, "agent_docker_median_s": 2.0, "ratio": 1.1}]),
        );
        assert_eq!(p1_at(&report, 30), Some((5.0, 1.02)));
        assert_eq!(p1_at(&report, 110), None);
    }
}
