//! P2 (one pod at a time, agent against bollard) and P3 (restart after a SIGKILL).

use super::*;

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
