//! D1: density. P1's burst at 250 pods (50 quick) with the agent started with `--max-pods 250`,
//! beside the same raw-Docker baseline; then, with the pods running, a P4-like window over the
//! agent's CPU and RSS. One repetition each, the agent first: its pods stay for the window.

use serde_json::json;

use crate::agent::{count_pods, PodCounts};
use crate::report::{cores, mib, secs, Report};
use crate::scenarios::{
    beside, burst_baseline, burst_into, cpu_per_pod, cpu_seconds_json, measure, steady_json, steps_json,
    steps_since_t0, Ctx, Steady, Steps,
};
use crate::stats::round3;
use crate::sys::CpuUse;

/// The agent's `--max-pods` in D1: kubelet's default is 110.
const MAX_PODS: &str = "250";
/// The pods' names: `d1-<i>`.
const PREFIX: &str = "d1";

/// The agent's run: the burst, then the window with the pods running.
struct AgentRun {
    docker_s: f64,
    pods_s: f64,
    steps: Vec<Steps>,
    cpu: CpuUse,
    steady: Steady,
    counts: Option<PodCounts>,
}

/// D1: the burst (agent, then baseline), and the agent's CPU and RSS with the pods running.
pub fn density(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let s = &ctx.settings;
    let n = s.density_pods;
    let agent = ctx.start_agent(&format!("{PREFIX}n{n}"), &["--max-pods", MAX_PODS])?;
    let (docker_s, pods_s, steps, cpu) = burst_into(ctx, &agent, PREFIX, n)?;
    eprintln!("  D1 N={n}: agent {docker_s:.2} s on Docker, {pods_s:.2} s on /pods");
    std::thread::sleep(s.settle);
    let steady = measure(&agent, s.density_window);
    let counts = agent.pods().map(|items| count_pods(&items, &format!("{PREFIX}-"))).ok();
    eprintln!(
        "  D1 ({n} pods): agent {} {} (max {}), dockerd {}; {counts:?}",
        cores(steady.cpu.agent),
        mib(steady.rss_kb),
        mib(steady.rss_max_kb),
        cores(steady.cpu.dockerd)
    );
    ctx.finish_agent(agent)?;
    let run = AgentRun {
        docker_s,
        pods_s,
        steps,
        cpu,
        steady,
        counts,
    };
    let (b, base_steps, base_cpu) = burst_baseline(ctx, PREFIX, n, 0)?;
    eprintln!("  D1 N={n}: baseline {b:.2} s");
    rows(report, n, &run, b, &base_steps, &base_cpu);
    report.figures(
        "d1_density",
        json!({
            "n": n,
            "max_pods": MAX_PODS,
            "agent_docker_s": round3(run.docker_s),
            "agent_pods_running_s": round3(run.pods_s),
            "baseline_s": round3(b),
            "ratio": round3(run.docker_s / b),
            "agent_cpu_s_per_pod": cpu_seconds_json(&[run.cpu], n),
            "baseline_cpu_s_per_pod": cpu_seconds_json(&[base_cpu], n),
            "agent_steps": steps_json(&run.steps),
            "baseline_steps": steps_json(&base_steps),
            "steady": steady_json(&run.steady),
            "running_after_window": run.counts.map(|c| c.running),
            "restarts_after_window": run.counts.map(|c| c.restarts),
        }),
    );
    Ok(())
}

/// The table's rows: the burst beside the baseline's (`b` seconds), then the window.
fn rows(report: &mut Report, n: usize, run: &AgentRun, b: f64, base_steps: &[Steps], base_cpu: &CpuUse) {
    let (a, p) = (run.docker_s, run.pods_s);
    let rate = |t: f64| format!("{:.1} pods/s", n as f64 / t);
    let scenario = format!("D1 N={n} (--max-pods {MAX_PODS})");
    report.row(
        &scenario,
        "all 2·N containers running (Docker)",
        format!("{} ({})", secs(Some(a)), rate(a)),
        format!("{} ({})", secs(Some(b)), rate(b)),
    );
    report.row(
        &scenario,
        "/pods: all N Running",
        format!("{} ({})", secs(Some(p)), rate(p)),
        String::new(),
    );
    report.row(
        &scenario,
        "p50 over pods, since written: sandbox created │ started │ app created │ started",
        steps_since_t0(&run.steps),
        steps_since_t0(base_steps),
    );
    report.row(
        &scenario,
        "CPU-seconds per pod during the burst: agent │ dockerd │ containerd+shims",
        cpu_per_pod(&[run.cpu], n),
        cpu_per_pod(&[*base_cpu], n),
    );
    report.row(&scenario, "agent / baseline", format!("{:.2}", a / b), String::new());
    let steady = &run.steady;
    let window = format!("{n} pods running, {:.0} s window", steady.cpu.window_s);
    report.row(
        &scenario,
        &format!("agent CPU, {window}"),
        cores(steady.cpu.agent),
        beside(&steady.cpu),
    );
    report.row(
        &scenario,
        &format!("agent RSS (end of window; max of 1 s samples), {window}"),
        format!("{} ({})", mib(steady.rss_kb), mib(steady.rss_max_kb)),
        String::new(),
    );
    report.row(
        &scenario,
        "Running / restarts after the window",
        run.counts
            .map_or("?".into(), |c| format!("{} / {}", c.running, c.restarts)),
        String::new(),
    );
}
