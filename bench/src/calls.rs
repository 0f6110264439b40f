//! C1: Docker API calls, counted by a proxy on the Docker socket ([`crate::proxy`]): per pod
//! start (agent and baseline through the same proxy), and per second of a steady node.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bollard::Docker;
use serde_json::json;

use crate::agent::count_pods;
use crate::engine::{self, Cleanup};
use crate::pods;
use crate::proxy::{delta, total, Counts, DockerProxy};
use crate::report::Report;
use crate::scenarios::Ctx;

/// Pods started at once, in a full and a quick run.
const PODS: (usize, usize) = (20, 10);

/// C1: N pods started at once through the proxy, then a steady window, then the baseline's N.
pub fn api_calls(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let n = if ctx.settings.quick { PODS.1 } else { PODS.0 };
    let window = if ctx.settings.quick {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(30)
    };
    let proxy = DockerProxy::start(&ctx.rt, Path::new("/var/run/docker.sock"))?;
    let endpoint = proxy.endpoint();
    let agent = ctx.start_agent("c1", &["--container-runtime-endpoint", &endpoint])?;
    std::thread::sleep(Duration::from_secs(2));
    let before = proxy.counts();
    for i in 0..n {
        agent.write_manifest(
            &format!("c1-{i}.yaml"),
            &pods::pod(&format!("c1-{i}"), pods::SLEEP_CMD, None),
        );
    }
    let began = Instant::now();
    loop {
        if agent.pods().is_ok_and(|items| count_pods(&items, "c1-").running >= n) {
            break;
        }
        if began.elapsed() > Duration::from_secs(120) {
            bail!(
                "C1: {n} pods not running after 2 min; log: {}",
                agent.log_path().display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let start = delta(&before, &proxy.counts());
    let start_secs = began.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let quiet = proxy.counts();
    std::thread::sleep(window);
    let steady = delta(&quiet, &proxy.counts());
    ctx.finish_agent(agent)?;

    let baseline = {
        let labels = ctx.baseline_labels("c1");
        let _cleanup = Cleanup::new(labels.filter());
        let docker = ctx.rt.block_on(async {
            Docker::connect_with_unix(&proxy.path().to_string_lossy(), 120, bollard::API_DEFAULT_VERSION)
                .context("connect to the proxy")?
                .negotiate_version()
                .await
                .context("negotiate through the proxy")
        })?;
        let before = proxy.counts();
        let results = ctx.rt.block_on(futures::future::join_all((0..n).map(|i| {
            let pod = format!("c1-{i}-{}", labels.run);
            let (docker, labels) = (&docker, &labels);
            async move { engine::baseline_pod(docker, labels, &pod, pods::SLEEP_CMD).await }
        })));
        for r in results {
            r?;
        }
        delta(&before, &proxy.counts())
    };

    let per = |c: &Counts, by: f64| total(c) as f64 / by;
    eprintln!(
        "  C1: {:.1} calls per pod start (baseline {:.1}); {:.2} calls/s at {n} steady pods",
        per(&start, n as f64),
        per(&baseline, n as f64),
        per(&steady, window.as_secs_f64())
    );
    report.row(
        "C1",
        &format!("Docker API calls per pod start ({n} pods at once, until all Running)"),
        format!("{:.1}", per(&start, n as f64)),
        format!("{:.1}", per(&baseline, n as f64)),
    );
    report.row(
        "C1",
        "… by request (per pod)",
        by_kind(&start, n as f64),
        by_kind(&baseline, n as f64),
    );
    report.row(
        "C1",
        &format!("Docker API calls per second, {n} steady pods"),
        format!(
            "{:.2} ({})",
            per(&steady, window.as_secs_f64()),
            by_kind(&steady, window.as_secs_f64())
        ),
        String::new(),
    );
    report.figures(
        "c1_api_calls",
        json!({
            "pods": n,
            "start_s": start_secs,
            "agent_start": start,
            "baseline_start": baseline,
            "steady_window_s": window.as_secs_f64(),
            "agent_steady": steady,
        }),
    );
    Ok(())
}

/// `2.0 POST /containers/create, 2.0 POST /containers/{id}/start, …`, most frequent first.
fn by_kind(counts: &Counts, by: f64) -> String {
    let mut kinds: Vec<(&String, &u64)> = counts.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    kinds
        .iter()
        .map(|(k, v)| format!("{:.2} {k}", **v as f64 / by))
        .collect::<Vec<_>>()
        .join(", ")
}
