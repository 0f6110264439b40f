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

/// When each step of one pod's start happened, seconds after the manifest was written (or the
/// baseline's first request).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    sandbox_create: f64,
    sandbox_start: f64,
    app_create: f64,
    app_start: f64,
}

mod burst;
mod single;
mod steady;

pub use burst::burst;
pub(crate) use burst::{burst_baseline, burst_into};
pub use single::{restart, single};
pub(crate) use steady::{beside, measure, steady_json, Steady};
pub use steady::{steady_exec, steady_http};
