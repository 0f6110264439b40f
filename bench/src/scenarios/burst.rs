//! P1: N pods written at once, the agent against the same containers through bollard.

use super::*;

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
