//! The scenarios of issue 5: each runs the agent (and, where there is one, its baseline), fills
//! the [`Report`], and leaves no container behind.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bollard::Docker;
use dockerlet_integration_tests::harness::random_hex;
use serde_json::json;
use tokio::runtime::Runtime;

use crate::agent::{count_pods, BenchAgent};
use crate::engine::{self, distinct, now_nanos, BaselineLabels, Cleanup, Event, Watcher, POD_NAME_LABEL};
use crate::load;
use crate::pods::{self, Probes};
use crate::report::{cores, mib, ms, ms3, secs, Report};
use crate::stats::{round3, Samples};
use crate::sys::{self, CpuUse, CpuWindow};

/// Sizes and repetitions of one invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `BENCH_QUICK=1`.
    pub quick: bool,
    /// P1 pod counts.
    pub burst_sizes: Vec<usize>,
    /// P1 repetitions per size (agent and baseline alternate which goes first).
    pub burst_reps: usize,
    /// P1v (API pods with a ConfigMap volume) pod counts.
    pub api_burst_sizes: Vec<usize>,
    /// P1v repetitions per size.
    pub api_burst_reps: usize,
    /// P2 repetitions (each: one agent pod and one baseline pod).
    pub single_reps: usize,
    /// P3 kills.
    pub kills: usize,
    /// Pods of the steady-state scenarios (P4/P5/P5b/P6).
    pub steady_pods: usize,
    /// CPU window at that many pods.
    pub window: Duration,
    /// CPU window of the idle agent.
    pub idle_window: Duration,
    /// Quiet time after the pods became ready, before the window.
    pub settle: Duration,
    /// P6 requests.
    pub stats_requests: usize,
    /// P7 rate and length.
    pub healthz_rate: f64,
    /// P7 length.
    pub healthz_duration: Duration,
    /// P7 also at the steady-state pod count (full runs), not only on the idle agent.
    pub healthz_under_load: bool,
    /// P8: `kubectl exec` / `docker exec` runs, and the kubelet API's exec / bollard's.
    pub kubelet_exec_runs: usize,
    /// P8: `/run` requests.
    pub kubelet_run_requests: usize,
    /// P8: the log the writer writes, in MiB.
    pub kubelet_log_mib: usize,
    /// P8: `kubectl logs` / `docker logs` reads of it.
    pub kubelet_log_reps: usize,
    /// P8: idle `follow=true` log streams held open for the RSS reading.
    pub follow_streams: usize,
    /// E1 rounds, one victim pod evicted in each.
    pub eviction_rounds: usize,
    /// D1 pods (the agent runs with `--max-pods 250`) and its steady window with them running.
    pub density_pods: usize,
    /// D1's steady window.
    pub density_window: Duration,
    /// Scenarios to run (`BENCH_ONLY=p1,p3`); empty: all.
    pub only: Vec<String>,
}

impl Settings {
    /// The settings for a full or a quick run, with `BENCH_ONLY` applied.
    pub fn new(quick: bool, only: Vec<String>) -> Self {
        if quick {
            Settings {
                quick,
                burst_sizes: vec![10, 30],
                burst_reps: 1,
                api_burst_sizes: vec![30],
                api_burst_reps: 1,
                single_reps: 10,
                kills: 10,
                steady_pods: 20,
                window: Duration::from_secs(30),
                idle_window: Duration::from_secs(5),
                settle: Duration::from_secs(2),
                stats_requests: 50,
                healthz_rate: 2000.0,
                healthz_duration: Duration::from_secs(10),
                healthz_under_load: false,
                kubelet_exec_runs: 10,
                kubelet_run_requests: 30,
                kubelet_log_mib: 50,
                kubelet_log_reps: 1,
                follow_streams: 100,
                eviction_rounds: 3,
                density_pods: 50,
                density_window: Duration::from_secs(10),
                only,
            }
        } else {
            Settings {
                quick,
                burst_sizes: vec![10, 50, 110],
                burst_reps: 2,
                api_burst_sizes: vec![110],
                api_burst_reps: 2,
                single_reps: 30,
                kills: 30,
                steady_pods: 110,
                window: Duration::from_secs(60),
                idle_window: Duration::from_secs(30),
                settle: Duration::from_secs(10),
                stats_requests: 100,
                healthz_rate: 2000.0,
                healthz_duration: Duration::from_secs(10),
                healthz_under_load: true,
                kubelet_exec_runs: 30,
                kubelet_run_requests: 100,
                kubelet_log_mib: 200,
                kubelet_log_reps: 3,
                follow_streams: 100,
                eviction_rounds: 10,
                density_pods: 250,
                density_window: Duration::from_secs(30),
                only,
            }
        }
    }

    /// True if scenario `name` runs in this invocation.
    pub fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }

    /// As JSON, for the report.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "quick": self.quick,
            "burst_sizes": self.burst_sizes,
            "burst_reps": self.burst_reps,
            "api_burst_sizes": self.api_burst_sizes,
            "api_burst_reps": self.api_burst_reps,
            "single_reps": self.single_reps,
            "kills": self.kills,
            "steady_pods": self.steady_pods,
            "window_s": self.window.as_secs_f64(),
            "idle_window_s": self.idle_window.as_secs_f64(),
            "stats_requests": self.stats_requests,
            "healthz_rate": self.healthz_rate,
            "healthz_duration_s": self.healthz_duration.as_secs_f64(),
            "healthz_under_load": self.healthz_under_load,
            "kubelet_exec_runs": self.kubelet_exec_runs,
            "kubelet_run_requests": self.kubelet_run_requests,
            "kubelet_log_mib": self.kubelet_log_mib,
            "kubelet_log_reps": self.kubelet_log_reps,
            "follow_streams": self.follow_streams,
            "eviction_rounds": self.eviction_rounds,
            "density_pods": self.density_pods,
            "density_window_s": self.density_window.as_secs_f64(),
            "only": self.only,
        })
    }
}

/// What every scenario needs.
pub struct Ctx {
    /// Runs bollard and the event watchers.
    pub rt: Runtime,
    /// The engine.
    pub docker: Docker,
    /// The release agent binary.
    pub bin: PathBuf,
    /// Where agent logs go (`target/bench/logs`).
    pub log_dir: PathBuf,
    /// Unique per invocation; part of every baseline label.
    pub run: String,
    /// Sizes and repetitions.
    pub settings: Settings,
}

impl Ctx {
    pub(crate) fn start_agent(&self, scenario: &str, extra: &[&str]) -> anyhow::Result<BenchAgent> {
        BenchAgent::start(&self.bin, scenario, &self.log_dir, extra)
    }

    pub(crate) fn baseline_labels(&self, scenario: &str) -> BaselineLabels {
        BaselineLabels {
            run: format!("{}-{scenario}", self.run),
            node: format!("bench-baseline-{}", random_hex()),
        }
    }

    /// Stops the agent and removes its containers now (the drop guard would, more slowly).
    pub(crate) fn finish_agent(&self, mut agent: BenchAgent) -> anyhow::Result<()> {
        agent.stop();
        self.rt
            .block_on(engine::remove_labelled(&self.docker, &agent.label()))?;
        Ok(())
    }
}

/// Seconds between `t0` and a Docker time, both ns since the epoch.
pub(crate) fn since(t0: i64, t: i64) -> f64 {
    (t - t0) as f64 / 1e9
}

// ---------------------------------------------------------------------------------------------
// P1: burst start
// ---------------------------------------------------------------------------------------------

/// One P1 run of the agent: until Docker runs all 2·N containers, until `/pods` shows N Running.
fn burst_agent(ctx: &Ctx, n: usize) -> anyhow::Result<(f64, f64, Vec<Steps>, CpuUse)> {
    let agent = ctx.start_agent(&format!("p1n{n}"), &[])?;
    let run = burst_into(ctx, &agent, "p1", n)?;
    ctx.finish_agent(agent)?;
    Ok(run)
}

/// P1's burst into a running agent: N manifests `<prefix>-<i>` written at once; seconds until
/// Docker runs all 2·N containers and until `/pods` shows N Running, each pod's steps, the CPU
/// over the burst. The pods stay (D1 measures the agent with them).
pub(crate) fn burst_into(
    ctx: &Ctx,
    agent: &BenchAgent,
    prefix: &str,
    n: usize,
) -> anyhow::Result<(f64, f64, Vec<Steps>, CpuUse)> {
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &agent.label());
    let manifests: Vec<(String, String)> = (0..n)
        .map(|i| {
            (
                format!("{prefix}-{i}.yaml"),
                pods::pod(&format!("{prefix}-{i}"), pods::SLEEP_CMD, None),
            )
        })
        .collect();
    let cpu = CpuWindow::start(agent.pid());
    let t0 = now_nanos();
    let began = Instant::now();
    for (file, yaml) in &manifests {
        agent.write_manifest(file, yaml);
    }
    let timeout = Duration::from_secs(120 + 3 * n as u64);
    let (mut on_docker, mut on_pods) = (None, None);
    while on_docker.is_none() || on_pods.is_none() {
        if began.elapsed() > timeout {
            bail!(
                "{prefix} N={n}: not all running after {timeout:?} (docker: {on_docker:?}, /pods: {on_pods:?}); log: {}",
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
        if on_pods.is_none() {
            if let Ok(items) = agent.pods() {
                if count_pods(&items, &format!("{prefix}-")).running >= n {
                    on_pods = Some(began.elapsed().as_secs_f64());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu = cpu.finish();
    let events = watcher.snapshot();
    let steps = (0..n)
        .filter_map(|i| pod_steps(&events, &agent.pod_name(&format!("{prefix}-{i}")), t0))
        .collect();
    Ok((on_docker.unwrap_or_default(), on_pods.unwrap_or_default(), steps, cpu))
}

/// One P1 baseline run: the same 2·N containers through bollard, all pods at once (pods
/// `<prefix>-<i>-<run>`), removed again.
pub(crate) fn burst_baseline(
    ctx: &Ctx,
    prefix: &str,
    n: usize,
    rep: usize,
) -> anyhow::Result<(f64, Vec<Steps>, CpuUse)> {
    let labels = ctx.baseline_labels(&format!("{prefix}n{n}r{rep}"));
    let _cleanup = Cleanup::new(labels.filter());
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &labels.filter());
    let cpu = CpuWindow::start(None);
    let t0 = now_nanos();
    let results = ctx.rt.block_on(futures::future::join_all((0..n).map(|i| {
        let pod = format!("{prefix}-{i}-{}", labels.run);
        let labels = &labels;
        let docker = &ctx.docker;
        async move { engine::baseline_pod(docker, labels, &pod, pods::SLEEP_CMD).await }
    })));
    for r in results {
        r?;
    }
    // As long as the agent may take: 250 pods take most of a minute on 2 busy cores.
    let timeout = Duration::from_secs(60 + n as u64);
    let starts = watcher.wait("baseline start events", timeout, |events| {
        let s = distinct(events, "start", |_| true);
        (s.len() >= 2 * n).then(|| s.values().copied().max().unwrap_or(t0))
    })?;
    let cpu = cpu.finish();
    let events = watcher.snapshot();
    let steps = (0..n)
        .filter_map(|i| pod_steps(&events, &format!("{prefix}-{i}-{}", labels.run), t0))
        .collect();
    drop(watcher);
    ctx.rt
        .block_on(engine::remove_labelled(&ctx.docker, &labels.filter()))?;
    Ok((since(t0, starts), steps, cpu))
}

/// P1 for every size: agent and baseline alternate which goes first.
pub fn burst(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let mut figures = Vec::new();
    for &n in &ctx.settings.burst_sizes {
        let (mut agent_docker, mut agent_pods, mut base) = (Vec::new(), Vec::new(), Vec::new());
        let (mut agent_steps, mut base_steps) = (Vec::new(), Vec::new());
        let (mut agent_cpu, mut base_cpu) = (Vec::new(), Vec::new());
        for rep in 0..ctx.settings.burst_reps {
            let mut run_agent = || -> anyhow::Result<()> {
                let (d, p, steps, cpu) = burst_agent(ctx, n)?;
                agent_cpu.push(cpu);
                eprintln!("  P1 N={n} rep {rep}: agent {d:.2} s on Docker, {p:.2} s on /pods");
                agent_docker.push(d);
                agent_pods.push(p);
                agent_steps.extend(steps);
                Ok(())
            };
            let mut run_base = || -> anyhow::Result<()> {
                let (b, steps, cpu) = burst_baseline(ctx, "p1", n, rep)?;
                base_cpu.push(cpu);
                eprintln!("  P1 N={n} rep {rep}: baseline {b:.2} s");
                base.push(b);
                base_steps.extend(steps);
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
        let (a, p, b) = (
            Samples::new(agent_docker.clone()).median(),
            Samples::new(agent_pods.clone()).median(),
            Samples::new(base.clone()).median(),
        );
        let ratio = a.zip(b).map(|(a, b)| a / b);
        let rate = |t: Option<f64>| t.map_or("n/a".to_string(), |t| format!("{:.1} pods/s", n as f64 / t));
        let scenario = format!("P1 N={n}");
        report.row(
            &scenario,
            "all 2·N containers running (Docker)",
            format!("{} ({})", secs(a), rate(a)),
            format!("{} ({})", secs(b), rate(b)),
        );
        report.row(
            &scenario,
            "/pods: all N Running",
            format!("{} ({})", secs(p), rate(p)),
            String::new(),
        );
        report.row(
            &scenario,
            "p50 over pods, since written: sandbox created │ started │ app created │ started",
            steps_since_t0(&agent_steps),
            steps_since_t0(&base_steps),
        );
        report.row(
            &scenario,
            "CPU-seconds per pod during the burst: agent │ dockerd │ containerd+shims",
            cpu_per_pod(&agent_cpu, n),
            cpu_per_pod(&base_cpu, n),
        );
        let ratio_text = ratio.map_or("n/a".to_string(), |r| format!("{r:.2}"));
        let dockerd_ratio = match (cpu_seconds(&agent_cpu, n)[1], cpu_seconds(&base_cpu, n)[1]) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let dockerd_text = dockerd_ratio.map_or("n/a".to_string(), |r| format!("{r:.2}"));
        if n == 110 {
            report.target_row(
                "P1d",
                &scenario,
                "dockerd CPU-seconds per pod, agent / baseline",
                dockerd_text,
                String::new(),
                "≤ 1.10",
                dockerd_ratio,
                1.10,
            );
        } else {
            report.row(
                &scenario,
                "dockerd CPU-seconds per pod, agent / baseline",
                dockerd_text,
                String::new(),
            );
        }
        if n == 110 {
            report.target_row(
                "P1",
                &scenario,
                "agent / baseline",
                ratio_text,
                String::new(),
                "≤ 1.05",
                ratio,
                1.05,
            );
        } else {
            report.row(&scenario, "agent / baseline", ratio_text, String::new());
        }
        figures.push(json!({
            "n": n,
            "agent_docker_s": agent_docker, "agent_pods_running_s": agent_pods, "baseline_s": base,
            "agent_docker_median_s": a, "agent_pods_running_median_s": p, "baseline_median_s": b,
            "agent_pods_per_s": a.map(|a| n as f64 / a), "baseline_pods_per_s": b.map(|b| n as f64 / b),
            "ratio": ratio,
            "agent_cpu_s_per_pod": cpu_seconds_json(&agent_cpu, n),
            "baseline_cpu_s_per_pod": cpu_seconds_json(&base_cpu, n),
            "agent_steps": steps_json(&agent_steps),
            "baseline_steps": steps_json(&base_steps),
        }));
    }
    if !ctx.settings.burst_sizes.contains(&110) {
        report.unjudged_row("P1", "P1 N=110", "agent / baseline", "not run (quick)".into(), "≤ 1.05");
    }
    report.figures("p1_burst_start", json!(figures));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// P2: single pod latency
// ---------------------------------------------------------------------------------------------

/// When each step of one pod's start happened, seconds after the manifest was written (or the
/// baseline's first request).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    sandbox_create: f64,
    sandbox_start: f64,
    app_create: f64,
    app_start: f64,
}

pub(crate) fn pod_steps(events: &[Event], pod: &str, t0: i64) -> Option<Steps> {
    let at = |container: &str, action: &str| {
        events
            .iter()
            .find(|e| e.pod == pod && e.container == container && e.action == action)
            .map(|e| since(t0, e.time_nano))
    };
    Some(Steps {
        sandbox_create: at("POD", "create")?,
        sandbox_start: at("POD", "start")?,
        app_create: at("main", "create")?,
        app_start: at("main", "start")?,
    })
}

fn single_agent(ctx: &Ctx, agent: &BenchAgent, watcher: &Watcher, i: usize) -> anyhow::Result<Steps> {
    let name = format!("p2-{i}");
    let full = agent.pod_name(&name);
    let file = format!("{name}.yaml");
    let yaml = pods::pod(&name, pods::SLEEP_TRAP_CMD, None);
    let t0 = now_nanos();
    agent.write_manifest(&file, &yaml);
    let steps = watcher.wait(&format!("{full} running"), Duration::from_secs(60), |events| {
        pod_steps(events, &full, t0)
    })?;
    agent.remove_manifest(&file);
    let label = format!("{POD_NAME_LABEL}={full}");
    let began = Instant::now();
    while !ctx
        .rt
        .block_on(engine::list_labelled(&ctx.docker, &label, true))?
        .is_empty()
    {
        if began.elapsed() > Duration::from_secs(60) {
            bail!("{full}: containers still there 60 s after its manifest was deleted");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(steps)
}

fn single_baseline(ctx: &Ctx, labels: &BaselineLabels, watcher: &Watcher, i: usize) -> anyhow::Result<Steps> {
    let pod = format!("p2-{i}-{}", labels.run);
    let t0 = now_nanos();
    ctx.rt
        .block_on(engine::baseline_pod(&ctx.docker, labels, &pod, pods::SLEEP_TRAP_CMD))?;
    let steps = watcher.wait(&format!("{pod} running"), Duration::from_secs(30), |events| {
        pod_steps(events, &pod, t0)
    })?;
    ctx.rt
        .block_on(engine::remove_labelled(&ctx.docker, &format!("{POD_NAME_LABEL}={pod}")))?;
    Ok(steps)
}

/// Mean CPU-seconds per pod of the agent, dockerd and containerd over several bursts.
pub(crate) fn cpu_seconds(runs: &[CpuUse], n: usize) -> [Option<f64>; 3] {
    let per_pod = |f: fn(&CpuUse) -> Option<f64>| {
        let v: Vec<f64> = runs.iter().filter_map(|u| f(u).map(|c| c * u.window_s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64 / n as f64)
    };
    [per_pod(|u| u.agent), per_pod(|u| u.dockerd), per_pod(|u| u.containerd)]
}

pub(crate) fn cpu_per_pod(runs: &[CpuUse], n: usize) -> String {
    let [a, d, c] = cpu_seconds(runs, n);
    let f = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1} ms", v * 1000.0));
    format!("{} │ {} │ {}", f(a), f(d), f(c))
}

pub(crate) fn cpu_seconds_json(runs: &[CpuUse], n: usize) -> serde_json::Value {
    let [a, d, c] = cpu_seconds(runs, n);
    json!({"agent": a, "dockerd": d, "containerd": c})
}

/// Medians over pods of each step's time since the start: `a │ b │ c │ d` in seconds.
pub(crate) fn steps_since_t0(steps: &[Steps]) -> String {
    let med = |f: fn(&Steps) -> f64| Samples::new(steps.iter().map(f).collect()).median();
    format!(
        "{} │ {} │ {} │ {}",
        secs(med(|s| s.sandbox_create)),
        secs(med(|s| s.sandbox_start)),
        secs(med(|s| s.app_create)),
        secs(med(|s| s.app_start))
    )
}

pub(crate) fn steps_json(steps: &[Steps]) -> serde_json::Value {
    let col = |f: fn(&Steps) -> f64| Samples::new(steps.iter().map(f).collect());
    let to_sandbox_create = col(|s| s.sandbox_create);
    let sandbox = col(|s| s.sandbox_start - s.sandbox_create);
    let between = col(|s| s.app_create - s.sandbox_start);
    let app = col(|s| s.app_start - s.app_create);
    json!({
        "total": col(|s| s.app_start).json_ms(),
        "until_sandbox_create": to_sandbox_create.json_ms(),
        "sandbox_create_to_start": sandbox.json_ms(),
        "sandbox_start_to_app_create": between.json_ms(),
        "app_create_to_start": app.json_ms(),
    })
}

/// P2: one pod at a time, agent and baseline alternating.
pub fn single(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let agent = ctx.start_agent("p2", &[])?;
    let agent_watcher = Watcher::start(&ctx.rt, &ctx.docker, &agent.label());
    let labels = ctx.baseline_labels("p2");
    let _cleanup = Cleanup::new(labels.filter());
    let base_watcher = Watcher::start(&ctx.rt, &ctx.docker, &labels.filter());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..ctx.settings.single_reps {
        if i % 2 == 0 {
            a.push(single_agent(ctx, &agent, &agent_watcher, i)?);
            b.push(single_baseline(ctx, &labels, &base_watcher, i)?);
        } else {
            b.push(single_baseline(ctx, &labels, &base_watcher, i)?);
            a.push(single_agent(ctx, &agent, &agent_watcher, i)?);
        }
        // Let the agent's termination work settle before the next start.
        std::thread::sleep(Duration::from_millis(200));
    }
    drop((agent_watcher, base_watcher));
    ctx.finish_agent(agent)?;
    let total = |s: &[Steps]| Samples::new(s.iter().map(|s| s.app_start).collect());
    let (ta, tb) = (total(&a), total(&b));
    let (a50, a99) = ta.p50_p99().unzip();
    let (b50, b99) = tb.p50_p99().unzip();
    let overhead = a50.zip(b50).map(|(a, b)| a - b);
    eprintln!(
        "  P2: agent p50 {} p99 {}, baseline p50 {} p99 {}",
        ms(a50),
        ms(a99),
        ms(b50),
        ms(b99)
    );
    report.row(
        "P2",
        &format!("manifest → containers running, p50 / p99 ({} runs)", a.len()),
        format!("{} / {}", ms(a50), ms(a99)),
        format!("{} / {}", ms(b50), ms(b99)),
    );
    let med = |s: &[Steps], f: fn(&Steps) -> f64| Samples::new(s.iter().map(f).collect()).median();
    report.row(
        "P2",
        "p50 steps: → sandbox create │ sandbox create→start │ → app create │ app create→start",
        format!(
            "{} │ {} │ {} │ {}",
            ms(med(&a, |s| s.sandbox_create)),
            ms(med(&a, |s| s.sandbox_start - s.sandbox_create)),
            ms(med(&a, |s| s.app_create - s.sandbox_start)),
            ms(med(&a, |s| s.app_start - s.app_create)),
        ),
        format!(
            "{} │ {} │ {} │ {}",
            ms(med(&b, |s| s.sandbox_create)),
            ms(med(&b, |s| s.sandbox_start - s.sandbox_create)),
            ms(med(&b, |s| s.app_create - s.sandbox_start)),
            ms(med(&b, |s| s.app_start - s.app_create)),
        ),
    );
    report.target_row(
        "P2",
        "P2",
        "overhead over baseline at p50",
        ms(overhead),
        String::new(),
        "≤ 30 ms",
        overhead.map(|o| o * 1000.0),
        30.0,
    );
    report.figures(
        "p2_single_pod",
        json!({
            "agent": steps_json(&a),
            "baseline": steps_json(&b),
            "overhead_p50_ms": overhead.map(|o| round3(o * 1000.0)),
        }),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// P3: restart latency
// ---------------------------------------------------------------------------------------------

/// P3: `docker kill` the container, time until the agent's replacement runs. The back-off is
/// reset between kills as kubelet resets it — the container ran for 2 × the maximum back-off —
/// with the maximum shortened to 500 ms so that takes 1 s, not 10 min.
pub fn restart(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    // The agent talks to Docker through the counting proxy: its create request is the restart
    // issued; Docker's `create` event comes when dockerd has done the create.
    let proxy = crate::proxy::DockerProxy::start(&ctx.rt, std::path::Path::new("/var/run/docker.sock"))?;
    let endpoint = proxy.endpoint();
    let agent = ctx.start_agent(
        "p3",
        &[
            "--crash-loop-backoff-initial",
            "500ms",
            "--crash-loop-backoff-max",
            "500ms",
            "--container-runtime-endpoint",
            &endpoint,
        ],
    )?;
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &agent.label());
    let full = agent.pod_name("p3");
    agent.write_manifest("p3.yaml", &pods::pod("p3", pods::SLEEP_CMD, None));
    let main_start = |events: &[Event], not: &[String]| {
        events
            .iter()
            .find(|e| e.pod == full && e.container == "main" && e.action == "start" && !not.contains(&e.id))
            .map(|e| (e.id.clone(), e.time_nano))
    };
    let (mut id, mut started) = watcher.wait("p3 running", Duration::from_secs(60), |e| main_start(e, &[]))?;
    let mut old: Vec<String> = Vec::new();
    let (mut to_create, mut to_start, mut from_kill) = (Vec::new(), Vec::new(), Vec::new());
    let mut to_issue = Vec::new();
    let reset_after = 1_300_000_000; // 2 × 500 ms, and a margin
    for k in 0..ctx.settings.kills {
        let wait = started + reset_after - now_nanos();
        if wait > 0 {
            std::thread::sleep(Duration::from_nanos(wait as u64));
        }
        let kill_at = now_nanos();
        ctx.rt.block_on(engine::kill(&ctx.docker, &id))?;
        old.push(id.clone());
        let died = watcher.wait("die event", Duration::from_secs(30), |events| {
            events
                .iter()
                .find(|e| e.id == id && e.action == "die")
                .map(|e| e.time_nano)
        })?;
        let (new_id, new_start) = watcher
            .wait("the restarted container", Duration::from_secs(60), |e| {
                main_start(e, &old)
            })
            .with_context(|| format!("kill {k}: no restart; log: {}", agent.log_path().display()))?;
        let created = watcher
            .snapshot()
            .iter()
            .find(|e| e.id == new_id && e.action == "create")
            .map_or(new_start, |e| e.time_nano);
        let issued = proxy
            .times("POST /containers/create")
            .into_iter()
            .filter(|t| *t >= died)
            .min()
            .unwrap_or(created);
        to_issue.push(since(died, issued));
        to_create.push(since(died, created));
        to_start.push(since(died, new_start));
        from_kill.push(since(kill_at, new_start));
        (id, started) = (new_id, new_start);
    }
    drop(watcher);
    let restarts = agent.pods().ok().map(|items| count_pods(&items, "p3-").restarts);
    ctx.finish_agent(agent)?;
    let (i, c, s, f) = (
        Samples::new(to_issue),
        Samples::new(to_create),
        Samples::new(to_start),
        Samples::new(from_kill),
    );
    let (i50, i99) = i.p50_p99().unzip();
    let (c50, c99) = c.p50_p99().unzip();
    let (s50, s99) = s.p50_p99().unzip();
    let (f50, f99) = f.p50_p99().unzip();
    eprintln!(
        "  P3: die → restart issued p50 {} p99 {}; → created p50 {} p99 {}; → started p50 {} p99 {}",
        ms(i50),
        ms(i99),
        ms(c50),
        ms(c99),
        ms(s50),
        ms(s99)
    );
    report.target_row(
        "P3",
        "P3",
        &format!(
            "die → restart issued (the agent's create request), p50 / p99 ({} kills)",
            i.len()
        ),
        format!("{} / {}", ms(i50), ms(i99)),
        String::new(),
        "p99 ≤ 20 ms",
        i99.map(|v| v * 1000.0),
        20.0,
    );
    report.row(
        "P3",
        "die → new container created (Docker's create event), p50 / p99",
        format!("{} / {}", ms(c50), ms(c99)),
        String::new(),
    );
    report.row(
        "P3",
        "die → new container started, p50 / p99",
        format!("{} / {}", ms(s50), ms(s99)),
        String::new(),
    );
    report.row(
        "P3",
        "kill request → new container started, p50 / p99",
        format!("{} / {}", ms(f50), ms(f99)),
        String::new(),
    );
    report.figures(
        "p3_restart",
        json!({
            "die_to_started": s.json_ms(),
            "die_to_issued": i.json_ms(),
            "die_to_created": c.json_ms(),
            "kill_to_started": f.json_ms(),
            "restart_count_reported": restarts,
        }),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// P4/P5/P5b/P6/P7: steady state
// ---------------------------------------------------------------------------------------------

/// CPU and memory over one window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steady {
    pub(crate) cpu: CpuUse,
    pub(crate) rss_kb: Option<u64>,
    pub(crate) rss_max_kb: Option<u64>,
}

/// Measures the agent over `window`, sampling its RSS every second.
pub(crate) fn measure(agent: &BenchAgent, window: Duration) -> Steady {
    let pid = agent.pid();
    let cpu = CpuWindow::start(pid);
    let end = Instant::now() + window;
    let mut rss_max = None;
    while Instant::now() < end {
        let rss = pid.and_then(|p| sys::status_kb(p, "VmRSS"));
        rss_max = rss_max.max(rss);
        std::thread::sleep(Duration::from_secs(1).min(end.saturating_duration_since(Instant::now())));
    }
    let cpu = cpu.finish();
    let rss = pid.and_then(|p| sys::status_kb(p, "VmRSS"));
    Steady {
        cpu,
        rss_kb: rss,
        rss_max_kb: rss_max.max(rss),
    }
}

pub(crate) fn steady_json(s: &Steady) -> serde_json::Value {
    let r = |v: Option<f64>| v.map(|v| (v * 10_000.0).round() / 10_000.0);
    json!({
        "window_s": round3(s.cpu.window_s),
        "agent_cores": r(s.cpu.agent),
        "dockerd_cores": r(s.cpu.dockerd),
        "containerd_cores": r(s.cpu.containerd),
        "machine_busy_cores": r(s.cpu.machine),
        "agent_rss_kb": s.rss_kb,
        "agent_rss_max_kb": s.rss_max_kb,
    })
}

pub(crate) fn beside(cpu: &CpuUse) -> String {
    format!(
        "dockerd {}, containerd+shims {}, machine {}",
        cores(cpu.dockerd),
        cores(cpu.containerd),
        cores(cpu.machine)
    )
}

/// P7 against `agent`: `/healthz` at the configured rate.
fn healthz_load(ctx: &Ctx, agent: &BenchAgent, report: &mut Report, label: &str) -> serde_json::Value {
    let s = &ctx.settings;
    let r = load::paced(&agent.healthz_url(), s.healthz_rate, s.healthz_duration, 4);
    let (p50, p99) = r.latencies.p50_p99().unzip();
    eprintln!(
        "  P7 {label}: p50 {} p99 {} at {:.0} req/s ({} errors, {} late)",
        ms3(p50),
        ms3(p99),
        r.achieved_rate,
        r.errors,
        r.late
    );
    report.target_row(
        "P7",
        &format!("P7 {label}"),
        &format!(
            "/healthz at {:.0} req/s for {:.0} s: p50 / p99",
            s.healthz_rate,
            s.healthz_duration.as_secs_f64()
        ),
        format!(
            "{} / {} ({:.0} req/s achieved, {} errors)",
            ms3(p50),
            ms3(p99),
            r.achieved_rate,
            r.errors
        ),
        String::new(),
        "p99 ≤ 1 ms",
        p99.map(|v| v * 1000.0),
        1.0,
    );
    json!({
        "latency": r.latencies.json_ms(),
        "ok": r.ok,
        "errors": r.errors,
        "late_sends": r.late,
        "achieved_rate": round3(r.achieved_rate),
    })
}

/// How long the steady-state pods may take to become ready once all run, before the window
/// starts anyway (exec liveness probes can overload a small machine: pods then never all get
/// ready, and that state is what gets measured).
const READY_GRACE: Duration = Duration::from_secs(60);

/// Writes `n` steady-state pods and waits until every one is Running and ready, or all are
/// Running and [`READY_GRACE`] has passed; returns how long that took and whether all were ready.
fn steady_pods(agent: &BenchAgent, prefix: &str, n: usize, probes: Probes) -> anyhow::Result<(f64, bool)> {
    let began = Instant::now();
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        agent.write_manifest(
            &format!("{name}.yaml"),
            &pods::pod(&name, pods::HTTPD_CMD, Some(probes)),
        );
    }
    let timeout = Duration::from_secs(180 + 3 * n as u64);
    let mut all_running_at: Option<Instant> = None;
    loop {
        let counts = agent.pods().map(|items| count_pods(&items, &format!("{prefix}-")));
        if let Ok(c) = counts {
            if c.ready >= n {
                return Ok((began.elapsed().as_secs_f64(), true));
            }
            if c.running >= n {
                let since = *all_running_at.get_or_insert_with(Instant::now);
                if since.elapsed() > READY_GRACE {
                    eprintln!(
                        "  {prefix}: all {n} Running but only {} ready after {READY_GRACE:?}; measuring anyway",
                        c.ready
                    );
                    return Ok((began.elapsed().as_secs_f64(), false));
                }
            }
        }
        if began.elapsed() > timeout {
            bail!(
                "{n} pods {prefix}: not all running after {timeout:?} ({counts:?}); log: {}",
                agent.log_path().display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Idle agent (0 pods), P7 at 0 pods, then P4/P5 (and P6, P7) at N pods with httpGet readiness
/// probes.
pub fn steady_http(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let s = &ctx.settings;
    let n = s.steady_pods;
    let agent = ctx.start_agent("p5", &[])?;
    std::thread::sleep(s.settle);
    let idle = measure(&agent, s.idle_window);
    eprintln!(
        "  idle: agent {} {}, dockerd {}",
        cores(idle.cpu.agent),
        mib(idle.rss_kb),
        cores(idle.cpu.dockerd)
    );
    report.row(
        "P4/P5 idle (0 pods)",
        &format!("agent CPU over {:.0} s", idle.cpu.window_s),
        cores(idle.cpu.agent),
        beside(&idle.cpu),
    );
    report.row("P4/P5 idle (0 pods)", "agent RSS", mib(idle.rss_kb), String::new());
    let p7_idle = if s.runs("p7") {
        Some(healthz_load(ctx, &agent, report, "(0 pods)"))
    } else {
        None
    };

    let (ready_after, all_ready) = steady_pods(&agent, "p5", n, Probes::HttpReadiness)?;
    eprintln!("  P5: {n} pods ready after {ready_after:.1} s (all ready: {all_ready})");
    std::thread::sleep(s.settle);
    let collector_before = collector_cpu_s(&agent);
    let busy = measure(&agent, s.window);
    let counts = agent.pods().map(|items| count_pods(&items, "p5-")).ok();
    eprintln!(
        "  P5 ({n} pods): agent {} {}, dockerd {}; {counts:?}",
        cores(busy.cpu.agent),
        mib(busy.rss_kb),
        cores(busy.cpu.dockerd)
    );
    let scenario = format!("P4/P5 ({n} pods, 1 s httpGet readiness)");
    let at_110 = n == 110;
    let rss_mib = busy.rss_kb.map(|kb| kb as f64 / 1024.0);
    let cpu_measure = format!("agent CPU over {:.0} s", busy.cpu.window_s);
    if at_110 {
        report.target_row(
            "P4",
            &scenario,
            "agent RSS (end of window; max in window)",
            format!("{} ({})", mib(busy.rss_kb), mib(busy.rss_max_kb)),
            String::new(),
            "≤ 25 MiB",
            rss_mib,
            25.0,
        );
        report.target_row(
            "P5",
            &scenario,
            &cpu_measure,
            cores(busy.cpu.agent),
            beside(&busy.cpu),
            "≤ 0.03 core",
            busy.cpu.agent,
            0.03,
        );
    } else {
        report.row(
            &scenario,
            "agent RSS (end of window; max in window)",
            format!("{} ({})", mib(busy.rss_kb), mib(busy.rss_max_kb)),
            String::new(),
        );
        report.row(&scenario, &cpu_measure, cores(busy.cpu.agent), beside(&busy.cpu));
        report.unjudged_row("P4", "P4 (110 pods)", "agent RSS", "not run (quick)".into(), "≤ 25 MiB");
        report.unjudged_row(
            "P5",
            "P5 (110 pods)",
            "agent CPU",
            "not run (quick)".into(),
            "≤ 0.03 core",
        );
    }
    report.row(
        &scenario,
        "all pods ready after written; ready / restarts after window",
        format!(
            "{}{} ; {} / {}",
            secs(Some(ready_after)),
            if all_ready { "" } else { " (not all ready)" },
            counts.map_or("?".into(), |c| c.ready.to_string()),
            counts.map_or("?".into(), |c| c.restarts.to_string())
        ),
        String::new(),
    );

    let p6 = stats_summary(ctx, &agent, report, n, collector_before, busy.cpu.window_s);
    let p7_busy = if s.runs("p7") && s.healthz_under_load {
        Some(healthz_load(ctx, &agent, report, &format!("({n} pods)")))
    } else {
        None
    };
    ctx.finish_agent(agent)?;
    report.figures(
        "p4_p5_steady_http",
        json!({
            "pods": n,
            "idle": steady_json(&idle),
            "busy": steady_json(&busy),
            "ready_after_s": round3(ready_after),
            "all_ready_before_window": all_ready,
            "ready_after_window": counts.map(|c| c.ready),
            "restarts_after_window": counts.map(|c| c.restarts),
        }),
    );
    report.figures("p6_stats_summary", p6);
    report.figures("p7_healthz", json!({"idle": p7_idle, "busy": p7_busy}));
    Ok(())
}

/// The stats collector's CPU time so far (`dockerlet_stats_collection_cpu_seconds_total` on
/// `/metrics`: the thread CPU time of its housekeeping); `None` when the agent has none.
fn collector_cpu_s(agent: &BenchAgent) -> Option<f64> {
    let (status, body) = agent.get(&agent.read_only_url("/metrics")).ok()?;
    if status != 200 {
        return None;
    }
    body.lines()
        .find_map(|l| l.strip_prefix("dockerlet_stats_collection_cpu_seconds_total "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// P6: `/stats/summary` latency at N pods, the collector's CPU over the P5 window (stats on
/// during P4/P5), and beside them the baseline: Docker's stats API (`stream=false`, as
/// cri-dockerd asks it) for every container of the pods at once.
fn stats_summary(
    ctx: &Ctx,
    agent: &BenchAgent,
    report: &mut Report,
    n: usize,
    collector_before: Option<f64>,
    window_s: f64,
) -> serde_json::Value {
    let s = &ctx.settings;
    let scenario = format!("P6 ({n} pods, 10 s housekeeping)");
    let collector = collector_before
        .zip(collector_cpu_s(agent))
        .map(|(a, b)| (b - a) / window_s);
    let stats_url = agent.read_only_url("/stats/summary");
    if let Ok((404, _)) = agent.get(&stats_url) {
        report.unjudged_row(
            "P6",
            &scenario,
            "/stats/summary p50 / p99",
            "n/a (endpoint not implemented)".into(),
            "≤ 10 ms",
        );
        return json!(null);
    }
    let baseline = docker_stats_pass(ctx, agent);
    let baseline_text = match &baseline {
        Ok((containers, secs)) => format!("Docker stats API, {containers} containers at once: {secs:.2} s"),
        Err(e) => format!("Docker stats API: {e}"),
    };
    let latency = match load::sequential(&stats_url, s.stats_requests) {
        Ok(samples) => {
            let (p50, p99) = samples.p50_p99().unzip();
            let row = (
                format!("/stats/summary p50 / p99 ({} requests)", samples.len()),
                format!("{} / {}", ms(p50), ms(p99)),
                p99.map(|v| v * 1000.0),
            );
            if n == 110 {
                report.target_row(
                    "P6",
                    &scenario,
                    &row.0,
                    row.1,
                    baseline_text.clone(),
                    "≤ 10 ms",
                    row.2,
                    10.0,
                );
            } else {
                report.row(&scenario, &row.0, row.1, baseline_text.clone());
            }
            samples.json_ms()
        }
        Err(e) => {
            report.errors.push(format!("P6: {e}"));
            json!({"error": e})
        }
    };
    let collector_text = collector.map_or("n/a (no dockerlet_stats_collection_cpu_seconds_total)".into(), |v| {
        cores(Some(v))
    });
    if n == 110 {
        report.target_row(
            "P6",
            &scenario,
            &format!("stats collector CPU over {window_s:.0} s"),
            collector_text,
            String::new(),
            "≤ 0.005 core",
            collector,
            0.005,
        );
    } else {
        report.row(
            &scenario,
            &format!("stats collector CPU over {window_s:.0} s"),
            collector_text,
            String::new(),
        );
    }
    json!({
        "summary_latency": latency,
        "collector_cores": collector,
        "docker_stats_baseline": baseline.map(|(c, s)| json!({"containers": c, "seconds": s})).unwrap_or_else(|e| json!({"error": e})),
    })
}

/// One pass of Docker's stats API over the agent's containers, all at once: how many, and
/// the seconds until the last answer.
fn docker_stats_pass(ctx: &Ctx, agent: &BenchAgent) -> Result<(usize, f64), String> {
    use bollard::query_parameters::{ListContainersOptions, StatsOptions};
    ctx.rt.block_on(async {
        let filters = std::collections::HashMap::from([("label".to_string(), vec![agent.label()])]);
        let list = ctx
            .docker
            .list_containers(Some(ListContainersOptions {
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .map_err(|e| e.to_string())?;
        let began = Instant::now();
        let calls = list.iter().filter_map(|c| c.id.clone()).map(|id| {
            let docker = ctx.docker.clone();
            async move {
                let mut stream = docker.stats(
                    &id,
                    Some(StatsOptions {
                        stream: false,
                        one_shot: false,
                    }),
                );
                futures::StreamExt::next(&mut stream)
                    .await
                    .transpose()
                    .map_err(|e| e.to_string())
            }
        });
        let answers = futures::future::join_all(calls).await;
        let secs = began.elapsed().as_secs_f64();
        let failed = answers.iter().filter(|a| a.is_err()).count();
        if failed > 0 {
            return Err(format!("{failed} of {} stats calls failed", answers.len()));
        }
        Ok((answers.len(), secs))
    })
}

/// P5b: N pods with a 1 s httpGet readiness probe and a 1 s exec liveness probe.
pub fn steady_exec(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let s = &ctx.settings;
    let n = s.steady_pods;
    let agent = ctx.start_agent("p5b", &[])?;
    let (ready_after, all_ready) = steady_pods(&agent, "p5b", n, Probes::HttpReadinessExecLiveness)?;
    eprintln!("  P5b: {n} pods running after {ready_after:.1} s (all ready: {all_ready})");
    std::thread::sleep(s.settle);
    let execs = Watcher::start_for(&ctx.rt, &ctx.docker, &agent.label(), &["exec_die"]);
    let (from, busy) = (now_nanos(), measure(&agent, s.window));
    let to = now_nanos();
    let probes = execs
        .snapshot()
        .iter()
        .filter(|e| e.time_nano >= from && e.time_nano <= to)
        .count();
    drop(execs);
    // Every CPU-second of the machine in the window (HTTP probes and the rest included) over
    // the exec probes that finished in it: an upper bound of one exec probe's cost.
    let per_probe = busy
        .cpu
        .machine
        .filter(|_| probes > 0)
        .map(|m| m * busy.cpu.window_s / probes as f64);
    let counts = agent.pods().map(|items| count_pods(&items, "p5b-")).ok();
    eprintln!(
        "  P5b ({n} pods): agent {} {}, dockerd {}; {counts:?}",
        cores(busy.cpu.agent),
        mib(busy.rss_kb),
        cores(busy.cpu.dockerd)
    );
    ctx.finish_agent(agent)?;
    let scenario = format!("P5b ({n} pods, + 1 s exec liveness)");
    report.row(
        &scenario,
        &format!("agent CPU over {:.0} s", busy.cpu.window_s),
        cores(busy.cpu.agent),
        beside(&busy.cpu),
    );
    report.row(
        &scenario,
        "agent RSS (end of window; max in window)",
        format!("{} ({})", mib(busy.rss_kb), mib(busy.rss_max_kb)),
        String::new(),
    );
    report.row(
        &scenario,
        "exec probes run in the window; machine CPU per exec probe (all machine CPU / probes)",
        format!(
            "{probes} ({:.1}/s); {}",
            probes as f64 / busy.cpu.window_s,
            per_probe.map_or("n/a".to_string(), |v| format!("{:.1} ms", v * 1000.0))
        ),
        String::new(),
    );
    report.row(
        &scenario,
        "all pods running (ready) after written; ready / restarts after window",
        format!(
            "{}{} ; {} / {}",
            secs(Some(ready_after)),
            if all_ready { " (all ready)" } else { " (not all ready)" },
            counts.map_or("?".into(), |c| c.ready.to_string()),
            counts.map_or("?".into(), |c| c.restarts.to_string())
        ),
        String::new(),
    );
    report.figures(
        "p5b_steady_http_exec",
        json!({
            "pods": n,
            "busy": steady_json(&busy),
            "ready_after_s": round3(ready_after),
            "all_ready_before_window": all_ready,
            "exec_probes_in_window": probes,
            "machine_cpu_s_per_exec_probe": per_probe,
            "ready_after_window": counts.map(|c| c.ready),
            "restarts_after_window": counts.map(|c| c.restarts),
        }),
    );
    Ok(())
}
