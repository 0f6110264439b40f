//! `dockerlet-bench`: the benchmarks of issue 5, run by `make bench`.
//!
//! Runs the release agent (`target/release/dockerlet`, or `$DOCKERLET_BIN`) against the real
//! Docker engine, each scenario beside its baseline where it has one, prints a markdown table
//! and writes the same figures as JSON to `target/bench/latest.json`. `BENCH_QUICK=1` runs fewer
//! pods and repetitions (under 3 minutes); `BENCH_ONLY=p1,p1c,p1v,p2,p3,p5,p5b,p7,p8,c1,d1,e1` picks scenarios.
//! What each scenario measures is described in `BENCHMARKS.md`.
//!
//! Every container the bench creates is removed again: agents' containers by their node label,
//! baseline containers by `io.dockerlet.bench=<run>`; also on a panic (drop guards) and on
//! Ctrl-C.
//!
//! # Layout
//! - [`scenarios`]: the scenarios P1 to P7.
//! - [`api_burst`]: P1v, the burst of API pods with ConfigMap volumes, on the in-memory API server.
//! - [`kubelet_api`]: P8, the kubelet API (exec, `/run`, logs, follow streams) beside Docker.
//! - [`density`]: D1, P1's burst at 250 pods (`--max-pods 250`) and the agent's cost with them.
//! - [`eviction`]: E1, eviction reaction time in API mode.
//! - [`chaos`]: `dockerlet-bench chaos` (`make chaos`): the fault scenarios and their pass
//!   criteria, BENCHMARKS.md's reliability table.
//! - [`agent`]: one agent process under measurement, started by the integration harness.
//! - [`engine`]: bollard, the event watcher, the baseline, clean-up.
//! - [`sys`]: CPU and RSS from `/proc`.
//! - [`load`]: HTTP timing and the paced load generator.
//! - [`stats`], [`report`], [`pods`].

mod agent;
mod api_burst;
mod calls;
mod chaos;
mod cni_burst;
mod density;
mod engine;
mod eviction;
mod kubelet_api;
mod load;
mod pods;
mod proxy;
mod report;
mod scenarios;
mod stats;
mod sys;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context as _};
use dockerlet_integration_tests::harness::random_hex;
use serde_json::json;

use report::Report;
use scenarios::{Ctx, Settings};

/// The workspace root (this crate's parent directory).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Output of a command in the workspace, trimmed; empty if it fails.
/// The report's line on the agent binary's code layout (agent/hot-code/README.md).
fn code_line(code: &serde_json::Value) -> String {
    let mb = |key: &str| code[key].as_u64().map(|b| b as f64 / 1e6);
    match (mb("text_bytes"), mb("hot_bytes")) {
        (Some(text), Some(hot)) => format!(
            "Agent code: {:.1} MB, {hot:.1} MB of it hot-code first (agent/hot-code).",
            text + hot
        ),
        (Some(text), None) => format!("Agent code: {text:.1} MB, no hot-code layout."),
        _ => "Agent code: unknown (no readelf).".to_string(),
    }
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs every scenario; `Ok(false)` if one of them failed (the others still ran).
fn run() -> anyhow::Result<bool> {
    let began = Instant::now();
    let quick = flag("BENCH_QUICK");
    let only: Vec<String> = std::env::var("BENCH_ONLY")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let settings = Settings::new(quick, only);
    let bin = std::env::var_os("DOCKERLET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/dockerlet"));
    if !bin.is_file() {
        bail!(
            "the agent binary is missing at {}: run `cargo build --release -p dockerlet` (`make bench` does)",
            bin.display()
        );
    }
    let out_dir = target_dir().join("bench");
    let log_dir = out_dir.join("logs");
    std::fs::create_dir_all(&log_dir).with_context(|| format!("create {}", log_dir.display()))?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    engine::install_interrupt_handler(&rt);
    let docker = rt.block_on(engine::connect())?;
    let docker_version = rt.block_on(engine::version(&docker));
    if !rt.block_on(engine::image_exists(&docker, engine::BUSYBOX_IMAGE)) {
        bail!("the image {} is missing: run `make image`", engine::BUSYBOX_IMAGE);
    }
    let ctx = Ctx {
        rt,
        docker,
        bin,
        log_dir,
        run: format!("bench-{}", random_hex()),
        settings,
    };
    if !ctx.rt.block_on(engine::image_exists(&ctx.docker, engine::PAUSE_IMAGE)) {
        // The agent provisions its built-in pause image at start; the baseline needs it too.
        eprintln!("provisioning {} through a short-lived agent", engine::PAUSE_IMAGE);
        drop(agent::BenchAgent::start(&ctx.bin, "pause", &ctx.log_dir, &[])?);
    }

    let commit = command_output("git", &["rev-parse", "--short", "HEAD"]);
    let dirty = !command_output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let mut machine = sys::machine_description();
    machine["docker"] = json!(docker_version);
    let code = sys::code_layout(&ctx.bin);
    if std::env::args().nth(1).as_deref() == Some("chaos") {
        let header = json!({"date": date, "commit": commit, "uncommitted_changes": dirty, "machine": machine});
        return chaos::run(&ctx, header);
    }
    eprintln!(
        "dockerlet bench ({}): commit {commit}{}, {} cores, {} GiB, Docker {docker_version}; agent logs in {}",
        if ctx.settings.quick { "quick" } else { "full" },
        if dirty { " (uncommitted changes)" } else { "" },
        machine["cores"],
        machine["memory_gib"],
        ctx.log_dir.display()
    );

    let mut report = Report::default();
    type Scenario = fn(&Ctx, &mut Report) -> anyhow::Result<()>;
    let scenarios: [(&str, &str, Scenario); 11] = [
        ("p1", "P1 burst start", scenarios::burst),
        ("p1c", "P1c burst start on a CNI bridge network", cni_burst::cni_burst),
        (
            "p1v",
            "P1v burst start, API pods with a ConfigMap volume",
            api_burst::burst_api,
        ),
        ("p2", "P2 single pod latency", scenarios::single),
        ("p3", "P3 restart latency", scenarios::restart),
        (
            "p5",
            "P4/P5/P6/P7 steady state, httpGet readiness",
            scenarios::steady_http,
        ),
        (
            "p5b",
            "P5b steady state, httpGet readiness + exec liveness",
            scenarios::steady_exec,
        ),
        (
            "p8",
            "P8 kubelet API: exec, /run, logs, follow streams",
            kubelet_api::kubelet_api,
        ),
        ("c1", "C1 Docker API calls", calls::api_calls),
        (
            "d1",
            "D1 density: burst at 250 pods (--max-pods 250), the agent's cost with them",
            density::density,
        ),
        ("e1", "E1 eviction reaction time", eviction::eviction),
    ];
    for (key, title, scenario) in scenarios {
        // P7 runs inside the steady-state scenario; `BENCH_ONLY=p7` runs that one.
        let runs = ctx.settings.runs(key) || (key == "p5" && ctx.settings.runs("p7"));
        if !runs {
            continue;
        }
        let t = Instant::now();
        eprintln!("{title} …");
        if let Err(e) = scenario(&ctx, &mut report) {
            eprintln!("  {title} FAILED: {e:#}");
            report.errors.push(format!("{title}: {e:#}"));
        }
        eprintln!("  ({:.0} s)", t.elapsed().as_secs_f64());
    }

    let header = json!({
        "date": date,
        "commit": commit,
        "uncommitted_changes": dirty,
        "machine": machine,
        "agent_code": code,
        "settings": ctx.settings.json(),
        "duration_s": began.elapsed().as_secs(),
    });
    let doc = report.json(header);
    // latest.json is this run; full.json / quick.json keep the latest of each kind.
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    let kind = out_dir.join(if ctx.settings.quick { "quick.json" } else { "full.json" });
    let path = out_dir.join("latest.json");
    for p in [&kind, &path] {
        std::fs::write(p, &text).with_context(|| format!("write {}", p.display()))?;
    }

    println!(
        "\n## dockerlet bench ({}) — {date}, commit {commit}{}\n\nMachine: {} cores, {} GiB, {}; Docker {docker_version}.\n",
        if ctx.settings.quick { "BENCH_QUICK=1" } else { "full run" },
        if dirty { " + uncommitted changes" } else { "" },
        machine["cores"],
        machine["memory_gib"],
        machine["cpu"].as_str().unwrap_or("?"),
    );
    println!("{}\n", code_line(&code));
    println!("{}", report.markdown());
    for e in &report.errors {
        println!("error: {e}");
    }
    println!(
        "\nFigures: {} ({:.0} s in all)",
        path.display(),
        began.elapsed().as_secs_f64()
    );
    Ok(report.errors.is_empty())
}
