//! P4–P7 and P5b: the steady node with probes — CPU, RSS, `/stats/summary`, `/healthz` under
//! load — and the measuring window the density run reuses.

use super::*;

/// CPU and memory over one window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steady {
    pub(crate) cpu: CpuUse,
    pub(crate) rss_kb: Option<u64>,
    pub(crate) rss_max_kb: Option<u64>,
    /// At the end of the window: the anonymous and the file-backed part of the RSS (the
    /// binary's code pages are most of the latter), and the threads.
    pub(crate) rss_anon_kb: Option<u64>,
    pub(crate) rss_file_kb: Option<u64>,
    pub(crate) threads: Option<u64>,
}

impl Steady {
    /// `anon 12.3 MiB, file 13.1 MiB, 22 threads`.
    pub(crate) fn rss_parts(&self) -> String {
        format!(
            "anon {}, file {}, {} threads",
            mib(self.rss_anon_kb),
            mib(self.rss_file_kb),
            self.threads.map_or("?".into(), |t| t.to_string())
        )
    }
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
    let status = |key: &str| pid.and_then(|p| sys::status_kb(p, key));
    Steady {
        cpu,
        rss_kb: rss,
        rss_max_kb: rss_max.max(rss),
        rss_anon_kb: status("RssAnon"),
        rss_file_kb: status("RssFile"),
        threads: status("Threads"),
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
        "agent_rss_anon_kb": s.rss_anon_kb,
        "agent_rss_file_kb": s.rss_file_kb,
        "agent_threads": s.threads,
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
            busy.rss_parts(),
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
        Err(e) => format!("Docker stats API: {e:#}"),
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
        "docker_stats_baseline": baseline.map(|(c, s)| json!({"containers": c, "seconds": s})).unwrap_or_else(|e| json!({"error": format!("{e:#}")})),
    })
}

/// One pass of Docker's stats API over the agent's containers, all at once: how many, and
/// the seconds until the last answer.
fn docker_stats_pass(ctx: &Ctx, agent: &BenchAgent) -> anyhow::Result<(usize, f64)> {
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
            .context("list the agent's containers")?;
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
                futures::StreamExt::next(&mut stream).await.transpose()
            }
        });
        let answers = futures::future::join_all(calls).await;
        let secs = began.elapsed().as_secs_f64();
        let total = answers.len();
        let failed = answers.iter().filter(|a| a.is_err()).count();
        if let Some(Err(first)) = answers.into_iter().find(Result::is_err) {
            return Err(anyhow::Error::new(first).context(format!("{failed} of {total} stats calls failed")));
        }
        Ok((total, secs))
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
