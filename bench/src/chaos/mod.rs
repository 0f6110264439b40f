//! `make chaos`: the faults the agent promises to survive, on the real Docker engine, each with
//! its pass criteria and the figures it measured (issue 33). Printed as the reliability table
//! of BENCHMARKS.md and written to `target/bench/chaos.json`; the process fails when a scenario
//! misses its criteria.
//!
//! - [`agent_faults`]: the agent SIGKILLed at 110 pods; every actor panicking with 50 pods.
//! - [`engine_faults`]: dockerd stopped and started at 110 pods; an engine that answers every
//!   call 500 ms late.
//! - [`api_outage`]: the API server away for five minutes.
//! - [`disk_full`]: the file system under `--root-dir` full.
//! - [`hostile_http`]: idle connections, slowloris, oversized heads and bodies and floods on
//!   every port.
//!
//! `CHAOS_QUICK=1` (CI's short form, on the debug build after `make test`) runs fewer pods and
//! shorter outages; `CHAOS_ONLY=kill,panic,engine,slow,api,disk,http` picks scenarios.

mod agent_faults;
mod api_outage;
mod disk_full;
mod engine_faults;
mod hostile_http;
mod node;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::scenarios::Ctx;

/// Sizes of the chaos run: the in a full run, smaller in the quick one.
#[derive(Debug, Clone)]
pub struct ChaosSettings {
    /// `CHAOS_QUICK=1`.
    pub quick: bool,
    only: Vec<String>,
    /// Pods when the agent is SIGKILLed and when dockerd restarts (110).
    pub node_pods: usize,
    /// Pods while each actor panics (50).
    pub panic_pods: usize,
    /// API pods through the API server's absence, and how long it is away (5 min).
    pub api_pods: usize,
    pub api_outage: Duration,
    /// Pods on the slow engine, and how long the agent is watched there.
    pub slow_pods: usize,
    pub slow_window: Duration,
    /// Idle connections held open on each port (10,000).
    pub idle_connections: usize,
    /// Requests per second of the floods on `/healthz` and `/pods` (5,000), and for how long.
    pub flood_rate: f64,
    pub flood_time: Duration,
}

impl ChaosSettings {
    /// From `CHAOS_QUICK` and `CHAOS_ONLY`.
    pub fn from_env() -> Self {
        let quick = crate::flag("CHAOS_QUICK");
        let only = std::env::var("CHAOS_ONLY")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        let pick = |full: usize, short: usize| if quick { short } else { full };
        let secs = |full: u64, short: u64| Duration::from_secs(if quick { short } else { full });
        ChaosSettings {
            quick,
            only,
            node_pods: pick(110, 20),
            panic_pods: pick(50, 10),
            api_pods: pick(20, 5),
            api_outage: secs(300, 20),
            slow_pods: pick(10, 3),
            slow_window: secs(60, 20),
            idle_connections: pick(10_000, 2_000),
            flood_rate: pick(5_000, 1_000) as f64,
            flood_time: secs(10, 3),
        }
    }

    fn runs(&self, key: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == key)
    }

    fn json(&self) -> Value {
        json!({
            "quick": self.quick,
            "node_pods": self.node_pods,
            "panic_pods": self.panic_pods,
            "api_pods": self.api_pods,
            "api_outage_s": self.api_outage.as_secs(),
            "slow_pods": self.slow_pods,
            "slow_window_s": self.slow_window.as_secs(),
            "idle_connections": self.idle_connections,
            "flood_rate": self.flood_rate,
            "flood_s": self.flood_time.as_secs(),
        })
    }
}

/// One criterion of a scenario: what it asks, what was measured, whether it held.
#[derive(Debug, Clone)]
pub struct Check {
    what: String,
    measured: String,
    held: bool,
}

/// What a scenario found.
#[derive(Debug, Default)]
pub struct Outcome {
    checks: Vec<Check>,
    /// Figures for the JSON report.
    pub figures: serde_json::Map<String, Value>,
}

impl Outcome {
    /// Records criterion `what` (`0 restarts`), the measured value, and whether it held.
    pub fn check(&mut self, what: impl Into<String>, measured: impl Into<String>, held: bool) {
        self.checks.push(Check {
            what: what.into(),
            measured: measured.into(),
            held,
        });
    }

    /// Records a figure for the JSON report.
    pub fn figure(&mut self, key: &str, value: impl Into<Value>) {
        self.figures.insert(key.to_string(), value.into());
    }

    fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.held)
    }
}

type Scenario = fn(&Ctx, &ChaosSettings) -> anyhow::Result<Outcome>;

/// The scenarios in the order they run: the cheap ones first, dockerd's restart last (it stops
/// every container on the engine).
const SCENARIOS: [(&str, &str, Scenario); 7] = [
    ("panic", "every actor panics", agent_faults::panics),
    ("kill", "agent SIGKILLed", agent_faults::sigkill),
    ("http", "hostile HTTP clients", hostile_http::hostile_http),
    ("disk", "--root-dir's file system full", disk_full::disk_full),
    (
        "slow",
        "an engine 500 ms late on every call",
        engine_faults::slow_engine,
    ),
    ("api", "the API server away", api_outage::api_outage),
    ("engine", "dockerd stopped and started", engine_faults::engine_restart),
];

/// Runs the chosen scenarios and prints the reliability table; `Ok(false)` if one failed.
pub fn run(ctx: &Ctx, header: Value) -> anyhow::Result<bool> {
    let settings = ChaosSettings::from_env();
    let began = Instant::now();
    let mut rows = Vec::new();
    for (key, title, scenario) in SCENARIOS {
        if !settings.runs(key) {
            continue;
        }
        eprintln!("chaos: {title} …");
        let t = Instant::now();
        let result = scenario(ctx, &settings);
        let secs = t.elapsed().as_secs_f64();
        match &result {
            Ok(o) => {
                for c in &o.checks {
                    eprintln!("  {} {}: {}", if c.held { "ok  " } else { "FAIL" }, c.what, c.measured);
                }
            }
            Err(e) => eprintln!("  FAILED: {e:#}"),
        }
        eprintln!("  ({secs:.0} s)");
        rows.push((key, title, result, secs));
    }
    let mut ok = true;
    let mut table = String::from("| scenario | criterion | measured | |\n|---|---|---|---|\n");
    let mut doc = Vec::new();
    for (key, title, result, secs) in &rows {
        match result {
            Ok(o) => {
                ok &= o.passed();
                for (i, c) in o.checks.iter().enumerate() {
                    let name = if i == 0 { *title } else { "" };
                    let mark = if c.held { "✓" } else { "✗" };
                    table.push_str(&format!("| {name} | {} | {} | {mark} |\n", c.what, c.measured));
                }
                let checks: Vec<Value> = o
                    .checks
                    .iter()
                    .map(|c| json!({"criterion": c.what, "measured": c.measured, "held": c.held}))
                    .collect();
                doc.push(json!({"scenario": key, "passed": o.passed(), "seconds": secs.round(),
                    "checks": checks, "figures": o.figures}));
            }
            Err(e) => {
                ok = false;
                table.push_str(&format!("| {title} | runs to the end | error: {e:#} | ✗ |\n"));
                doc.push(json!({"scenario": key, "passed": false, "error": format!("{e:#}")}));
            }
        }
    }
    let mut header = header;
    header["settings"] = settings.json();
    header["duration_s"] = json!(began.elapsed().as_secs());
    let out = crate::target_dir().join("bench/chaos.json");
    let text = serde_json::to_string_pretty(&json!({"run": header, "scenarios": doc}))? + "\n";
    std::fs::write(&out, text).with_context(|| format!("write {}", out.display()))?;
    println!(
        "\n## dockerlet chaos ({}) — {}, commit {}\n\n{table}\nFigures: {} ({:.0} s in all)",
        if settings.quick { "CHAOS_QUICK=1" } else { "full run" },
        header["date"].as_str().unwrap_or("?"),
        header["commit"].as_str().unwrap_or("?"),
        out.display(),
        began.elapsed().as_secs_f64()
    );
    Ok(ok)
}
