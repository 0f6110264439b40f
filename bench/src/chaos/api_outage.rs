//! The API server away: the agent reaches the in-memory API server through a TCP proxy the
//! scenario cuts (every connection closed, new ones closed at once) for five minutes. Its pods
//! are not disturbed, its memory stays bounded, and once the API server is back the Lease, the
//! Node's status and a pod status that changed meanwhile reach it within 10 s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;

use super::agent_faults::start_timeout;
use super::node::{describe, difference, ChaosNode, Running};
use super::{ChaosSettings, Outcome};
use crate::agent::count_pods;
use crate::api_burst::wait_watching;
use crate::scenarios::Ctx;

/// How long after the API server is back the agent has to bring it up to date.
const CONVERGE: f64 = 10.0;

/// A TCP proxy that can be cut: while cut, every connection through it is closed and new ones
/// are closed as soon as they are accepted.
struct CuttableProxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CuttableProxy {
    fn start(rt: &Runtime, upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .context("bind the API proxy")?;
        let addr = listener.local_addr()?;
        let up = Arc::new(AtomicBool::new(true));
        let open: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (is_up, conns) = (up.clone(), open.clone());
        let accept = rt.spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_up.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                let mut conns = conns.lock().unwrap_or_else(|e| e.into_inner());
                conns.retain(|h| !h.is_finished());
                conns.push(task.abort_handle());
            }
        });
        Ok(CuttableProxy { addr, up, open, accept })
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for h in self.open.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            h.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// An API pod `name` bound to `node`: busybox leaving on TERM.
fn api_pod(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{
            "name": "main", "image": "dockerlet.local/busybox:1", "imagePullPolicy": "IfNotPresent",
            "command": crate::pods::SLEEP_TRAP_CMD}]}
    })
}

/// What the API server holds of the node: the Lease's renewTime, the Ready condition's
/// lastHeartbeatTime, and pod `api-0`'s restart count.
fn api_view(api: &ApiServer, node: &str) -> (String, String, i64) {
    let renew = api
        .get("leases", "kube-node-lease", node)
        .and_then(|l| l["spec"]["renewTime"].as_str().map(String::from))
        .unwrap_or_default();
    let heartbeat = api
        .get("nodes", "", node)
        .and_then(|n| {
            n["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready")
                .and_then(|c| c["lastHeartbeatTime"].as_str().map(String::from))
        })
        .unwrap_or_default();
    let restarts = api
        .get("pods", "default", "api-0")
        .and_then(|p| p["status"]["containerStatuses"][0]["restartCount"].as_i64())
        .unwrap_or(0);
    (renew, heartbeat, restarts)
}

/// The running containers of every pod but `api-0`.
fn others(node: &ChaosNode) -> Running {
    node.agent
        .containers()
        .into_iter()
        .filter(|c| c.state.running)
        .filter(|c| {
            c.config
                .labels
                .as_ref()
                .and_then(|l| l.get("io.kubernetes.pod.name"))
                .is_none_or(|n| n != "api-0")
        })
        .map(|c| (c.id, c.state.started_at))
        .collect()
}

pub fn api_outage(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let n = s.api_pods;
    let api = ApiServer::start_with(ApiServerConfig::default()).context("start the in-memory API server")?;
    let proxy = CuttableProxy::start(&ctx.rt, api.addr())?;
    let kubeconfig = api.kubeconfig().replace(
        &api.url(),
        &api.url().replace(&api.addr().to_string(), &proxy.addr.to_string()),
    );
    let dir = tempfile::tempdir().context("a temporary directory")?;
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig).context("write the kubeconfig")?;
    let node = ChaosNode::start(ctx, "api", &["--kubeconfig", &path.display().to_string()])?;
    let name = node.agent.node().to_string();
    wait_watching(&api, &name)?;
    for i in 0..n {
        api.create(api_pod(&format!("api-{i}"), &name))
            .context("create a pod")?;
    }
    let began = Instant::now();
    while count_pods(&api.list("pods"), "api-").ready < n {
        if began.elapsed() > start_timeout(n) {
            bail!("{n} API pods not ready in the API within {:?}", start_timeout(n));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = others(&node);
    let rss_before = node.rss_kb().unwrap_or(0);

    proxy.cut();
    let cut = Instant::now();
    let (mut rss_max, mut healthz_bad, mut killed) = (rss_before, 0usize, false);
    let mut disturbed = None;
    while cut.elapsed() < s.api_outage {
        rss_max = rss_max.max(node.rss_kb().unwrap_or(0));
        healthz_bad += usize::from(node.healthz() != Some(200));
        disturbed = disturbed.or_else(|| difference(&before, &others(&node)));
        // A status that changes while the API server is away: api-0's container dies.
        if !killed && cut.elapsed() + Duration::from_secs(15) >= s.api_outage {
            kill_app_container(&node, "api-0")?;
            killed = true;
        }
        std::thread::sleep(Duration::from_secs(2).min(s.api_outage.saturating_sub(cut.elapsed())));
    }
    let stale = api_view(&api, &name);
    proxy.restore();
    let back = Instant::now();
    let (mut lease_s, mut node_s, mut pod_s) = (None, None, None);
    while back.elapsed() < Duration::from_secs(60) && (lease_s.is_none() || node_s.is_none() || pod_s.is_none()) {
        let (renew, heartbeat, restarts) = api_view(&api, &name);
        let t = back.elapsed().as_secs_f64();
        lease_s = lease_s.or((renew != stale.0).then_some(t));
        node_s = node_s.or((heartbeat != stale.1).then_some(t));
        pod_s = pod_s.or((restarts > stale.2).then_some(t));
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = others(&node);
    let within = |v: Option<f64>| v.is_some_and(|t| t <= CONVERGE);
    let shown = |v: Option<f64>| v.map_or("not within 60 s".to_string(), |t| format!("{t:.1} s"));

    let mut o = Outcome::default();
    let minutes = s.api_outage.as_secs_f64() / 60.0;
    o.check(
        format!("no pod disturbed during {minutes:.1} min away (but api-0, whose container was killed)"),
        disturbed.unwrap_or_else(|| describe(&before, &after)),
        difference(&before, &after).is_none(),
    );
    o.check(
        "/healthz 200 throughout",
        format!("{healthz_bad} samples not 200"),
        healthz_bad == 0,
    );
    o.check(
        "memory bounded (RSS ≤ +8 MiB)",
        format!(
            "{:.1} → max {:.1} MiB",
            rss_before as f64 / 1024.0,
            rss_max as f64 / 1024.0
        ),
        rss_max <= rss_before + 8 * 1024,
    );
    o.check("Lease renewed ≤ 10 s after", shown(lease_s), within(lease_s));
    o.check("Node status written ≤ 10 s after", shown(node_s), within(node_s));
    o.check(
        "the pod status that changed meanwhile written ≤ 10 s after",
        shown(pod_s),
        within(pod_s),
    );
    o.figure("pods", n);
    o.figure("outage_s", s.api_outage.as_secs());
    o.figure("lease_s", lease_s);
    o.figure("node_status_s", node_s);
    o.figure("pod_status_s", pod_s);
    o.figure("rss_before_kb", rss_before);
    o.figure("rss_max_kb", rss_max);
    Ok(o)
}

/// `docker kill`s the app container of pod `pod`.
pub(super) fn kill_app_container(node: &ChaosNode, pod: &str) -> anyhow::Result<()> {
    let id = node
        .agent
        .containers()
        .into_iter()
        .find(|c| {
            c.state.running
                && c.config.labels.as_ref().is_some_and(|l| {
                    l.get("io.kubernetes.pod.name").map(String::as_str) == Some(pod)
                        && l.get("io.kubernetes.container.name").map(String::as_str) == Some("main")
                })
        })
        .map(|c| c.id)
        .with_context(|| format!("no running app container of {pod}"))?;
    dockerlet_integration_tests::docker::kill(&id);
    Ok(())
}
