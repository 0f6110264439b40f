//! P1c: P1 at N pods on a CNI bridge network — Debian's `bridge` with `host-local` IPAM, a
//! kubenet-style node network — against the same containers made through bollard and attached
//! with the same CNI calls (the agent's own CNI crate, the same plugins and configuration), and
//! the cost of one CNI ADD and DEL: the baseline times its calls, the agent reports them in
//! `kubelet_network_plugin_operations_duration_seconds`. Not run without the plugins in
//! `/usr/lib/cni` (`containernetworking-plugins`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use dockerlet_cni::{Cni, CniSettings};
use serde_json::json;

use crate::agent::count_pods;
use crate::engine::{self, distinct, now_nanos, Cleanup, Watcher};
use crate::pods;
use crate::report::{ms, secs, Report};
use crate::scenarios::{burst_into, since, Ctx};
use crate::stats::Samples;

/// Debian's plugins.
const PLUGINS: &str = "/usr/lib/cni";

/// One network for one run: its bridge, subnet and directories; the bridge is deleted on drop.
struct BenchNet {
    dir: tempfile::TempDir,
    name: String,
    bridge: String,
}

impl BenchNet {
    /// A network `dlbench-<tag>` on `subnet`.
    fn new(tag: &str, subnet: &str) -> anyhow::Result<BenchNet> {
        let net = BenchNet {
            dir: tempfile::tempdir().context("tempdir")?,
            name: format!("dlbench-{tag}"),
            bridge: format!("dlbench{tag}"),
        };
        let list = json!({
            "cniVersion": "1.0.0",
            "name": net.name,
            "plugins": [{
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": net.dir.path().join("ipam"),
                },
            }],
        });
        std::fs::create_dir_all(net.conf_dir()).context("the configuration directory")?;
        std::fs::write(net.conf_dir().join("10-bench.conflist"), list.to_string()).context("the configuration")?;
        Ok(net)
    }

    fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("net.d")
    }

    fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn settings(&self) -> CniSettings {
        CniSettings {
            conf_dir: self.conf_dir(),
            bin_dirs: vec![PathBuf::from(PLUGINS)],
            cache_dir: self.cache_dir(),
            timeout: Duration::from_secs(120),
            node: format!("bench-baseline-{}", self.name),
        }
    }

    fn agent_args(&self) -> Vec<String> {
        vec![
            "--network-plugin".into(),
            "cni".into(),
            "--cni-conf-dir".into(),
            self.conf_dir().display().to_string(),
            "--cni-bin-dir".into(),
            PLUGINS.into(),
            "--cni-cache-dir".into(),
            self.cache_dir().display().to_string(),
        ]
    }
}

impl Drop for BenchNet {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}

/// `(sum, count)` of `kubelet_network_plugin_operations_duration_seconds{operation_type=op}` in
/// a `/metrics` text.
fn operation_seconds(metrics: &str, op: &str) -> Option<(f64, f64)> {
    let value = |suffix: &str| {
        let prefix = format!("kubelet_network_plugin_operations_duration_seconds_{suffix}{{operation_type=\"{op}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.trim().parse::<f64>().ok())
    };
    Some((value("sum")?, value("count")?))
}

/// One agent run: the burst, then the pods deleted (every sandbox detached); seconds until
/// Docker runs all 2·N containers, the mean ADD and DEL in seconds.
fn agent_run(ctx: &Ctx, n: usize) -> anyhow::Result<(f64, Option<f64>, Option<f64>)> {
    let net = BenchNet::new("a", "10.250.0.0/22")?;
    let args = net.agent_args();
    let agent = ctx.start_agent("p1c", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
    let (on_docker, _, _, _) = burst_into(ctx, &agent, "p1c", n)?;
    for i in 0..n {
        agent.remove_manifest(&format!("p1c-{i}.yaml"));
    }
    let began = Instant::now();
    while count_pods(&agent.pods()?, "p1c-").listed > 0 {
        if began.elapsed() > Duration::from_secs(120 + n as u64) {
            bail!("P1c: the pods are not gone; log: {}", agent.log_path().display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, metrics) = agent.get(&agent.read_only_url("/metrics"))?;
    let mean = |op| {
        operation_seconds(&metrics, op)
            .filter(|(_, c)| *c > 0.0)
            .map(|(s, c)| s / c)
    };
    let (add, del) = (mean("set_up_pod"), mean("tear_down_pod"));
    ctx.finish_agent(agent)?;
    Ok((on_docker, add, del))
}

/// One baseline run: the same pods through bollard, each sandbox attached with CNI ADD between
/// its start and the app's create; seconds until all 2·N run, each ADD and each DEL.
fn baseline_run(ctx: &Ctx, n: usize, rep: usize) -> anyhow::Result<(f64, Vec<f64>, Vec<f64>)> {
    let net = BenchNet::new("b", "10.251.0.0/22")?;
    let cni = Cni::new(net.settings());
    cni.reload().context("the baseline's CNI configuration")?;
    let labels = ctx.baseline_labels(&format!("p1cn{n}r{rep}"));
    let _cleanup = Cleanup::new(labels.filter());
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &labels.filter());
    let t0 = now_nanos();
    let results = ctx.rt.block_on(futures::future::join_all((0..n).map(|i| {
        let pod = format!("p1c-{i}-{}", labels.run);
        let (labels, docker, cni) = (&labels, &ctx.docker, &cni);
        async move { engine::baseline_pod_on(docker, labels, &pod, pods::SLEEP_CMD, &[], Some(cni)).await }
    })));
    let mut sandboxes = Vec::new();
    let mut adds = Vec::new();
    for r in results {
        let (sandbox, add) = r?;
        sandboxes.push(sandbox);
        adds.extend(add.map(|d| d.as_secs_f64()));
    }
    let starts = watcher.wait("baseline start events", Duration::from_secs(60 + n as u64), |events| {
        let s = distinct(events, "start", |_| true);
        (s.len() >= 2 * n).then(|| s.values().copied().max().unwrap_or(t0))
    })?;
    drop(watcher);
    let mut dels = Vec::new();
    for sandbox in &sandboxes {
        let began = Instant::now();
        ctx.rt
            .block_on(cni.del(sandbox, ""))
            .context("the baseline's CNI DEL")?;
        dels.push(began.elapsed().as_secs_f64());
    }
    ctx.rt
        .block_on(engine::remove_labelled(&ctx.docker, &labels.filter()))?;
    Ok((since(t0, starts), adds, dels))
}

/// P1c: agent and baseline alternate which goes first; not run without the plugins.
pub fn cni_burst(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let n = if ctx.settings.quick { 10 } else { 110 };
    let scenario = format!("P1c N={n} (CNI bridge + host-local)");
    if !Path::new(PLUGINS).join("bridge").exists() {
        let why = format!("not run: no CNI plugins in {PLUGINS} (containernetworking-plugins)");
        eprintln!("  P1c {why}");
        report.row(&scenario, "all 2·N containers running", why.clone(), "—".into());
        report.figures("p1c_cni_burst", json!({"not_run": why}));
        return Ok(());
    }
    let (mut agent, mut base) = (Vec::new(), Vec::new());
    let (mut agent_add, mut agent_del, mut base_add, mut base_del) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rep in 0..ctx.settings.burst_reps {
        let mut run_agent = || -> anyhow::Result<()> {
            let (d, add, del) = agent_run(ctx, n)?;
            eprintln!(
                "  P1c N={n} rep {rep}: agent {d:.2} s; ADD {} DEL {} (mean)",
                ms(add),
                ms(del)
            );
            agent.push(d);
            agent_add.extend(add);
            agent_del.extend(del);
            Ok(())
        };
        let mut run_base = || -> anyhow::Result<()> {
            let (b, adds, dels) = baseline_run(ctx, n, rep)?;
            eprintln!("  P1c N={n} rep {rep}: baseline {b:.2} s");
            base.push(b);
            base_add.extend(adds);
            base_del.extend(dels);
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
    let (a, b) = (
        Samples::new(agent.clone()).median(),
        Samples::new(base.clone()).median(),
    );
    let ratio = a.zip(b).map(|(a, b)| a / b);
    report.row(&scenario, "all 2·N containers running (Docker)", secs(a), secs(b));
    report.row(
        &scenario,
        "agent / baseline",
        ratio.map_or("n/a".into(), |r| format!("{r:.2}")),
        String::new(),
    );
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    report.row(
        &scenario,
        "CNI ADD per pod, mean (agent: kubelet_network_plugin_operations_duration_seconds) │ DEL",
        format!("{} │ {}", ms(mean(&agent_add)), ms(mean(&agent_del))),
        format!("{} │ {}", ms(mean(&base_add)), ms(mean(&base_del))),
    );
    report.figures(
        "p1c_cni_burst",
        json!({
            "n": n,
            "agent_docker_s": agent, "baseline_s": base, "ratio": ratio,
            "agent_add_mean_s": mean(&agent_add), "agent_del_mean_s": mean(&agent_del),
            "baseline_add_mean_s": mean(&base_add), "baseline_del_mean_s": mean(&base_del),
            "baseline_add": Samples::new(base_add.clone()).json_ms(),
        }),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The histogram's sum and count for one operation are read from the exposition text.
    #[test]
    fn the_add_cost_is_read_from_the_metrics() {
        let text = "kubelet_network_plugin_operations_duration_seconds_sum{operation_type=\"set_up_pod\"} 2.5\n\
                    kubelet_network_plugin_operations_duration_seconds_count{operation_type=\"set_up_pod\"} 10\n\
                    kubelet_network_plugin_operations_duration_seconds_count{operation_type=\"tear_down_pod\"} 3\n";
        assert_eq!(operation_seconds(text, "set_up_pod"), Some((2.5, 10.0)));
        assert_eq!(operation_seconds(text, "tear_down_pod"), None);
    }
}
