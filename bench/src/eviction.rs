//! E1: eviction reaction time. Only API pods are evicted (static pods are critical), so the
//! agent runs in API mode against the in-process test API server (as P1v), with a hard
//! `memory.available` threshold 1 GiB under what the machine has available when it starts,
//! `--eviction-pressure-transition-period 1s` and the node status period at its default (10 s:
//! the EvictionActor observes at that period, so this is the reaction a user gets).
//!
//! Each round: a BestEffort victim pod (busybox sleeping, leaving on TERM) is created through
//! the API and runs; the bench itself allocates and writes enough memory to take
//! `memory.available` 512 MiB under the threshold, 64 MiB at a time, reading `memory.available`
//! after each step: T0 is the first reading under the threshold (the allocation takes about
//! 2 s, and the agent may read the node during it). Until the
//! eviction the bench reads `memory.available` every 100 ms and allocates more when it climbs
//! back to within 256 MiB of the threshold (the kernel moving file pages to the inactive list
//! gives back "available" memory; up to 1 GiB more, reported per round). Docker's
//! `kill` event of the victim's app container is the agent's stop, its `die` event T1. The pod
//! must end Failed / `Evicted` in the API. Then the memory is freed, the bench waits until the
//! Node's MemoryPressure is False again, and deletes the pod.
//!
//! After upstream's `test/e2e_node/eviction_test.go` (`runEvictionTest`: the threshold set from
//! what the node has free, pressure induced, the pod evicted, the condition gone again).

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::harness::random_hex;
use serde_json::{json, Value};

use crate::agent::BenchAgent;
use crate::api_burst::wait_watching;
use crate::engine::{now_nanos, Event, Watcher, BUSYBOX_IMAGE};
use crate::pods;
use crate::report::{ms, Report};
use crate::scenarios::{since, Ctx};
use crate::stats::{round3, Samples};
use crate::sys;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Below this much `memory.available` the scenario is not run: the allocation would push the
/// machine (shared with others) toward real OOM.
const MIN_AVAILABLE: u64 = 3 * GIB;
/// The threshold sits this far under `memory.available` at the agent's start.
const THRESHOLD_BELOW: u64 = GIB;
/// Each round allocates until `memory.available` is this far under the threshold (about 1.5 GiB
/// in all on an otherwise quiet machine; other users moving it are taken into account).
const OVERSHOOT: u64 = 512 * MIB;
/// A new agent, with a new threshold, is started when `memory.available` is less than this
/// above the threshold before a round: the machine is near the threshold on its own.
const HEADROOM: u64 = 256 * MIB;
/// A new agent, with a new threshold, is started rather than allocate more than this.
const MAX_ALLOCATION: u64 = 2 * GIB + 512 * MIB;
/// What a round may add to its allocation while it waits for the eviction, to keep
/// `memory.available` under the threshold when the kernel moves file pages back to the inactive
/// list (which `memory.available` counts as available).
const MAX_TOP_UP: u64 = GIB;
/// The allocation's step: `memory.available` is read after each.
const CHUNK: u64 = 64 * MIB;
/// How often a round reads `memory.available` while it waits for the eviction.
const HOLD_PERIOD: Duration = Duration::from_millis(100);
/// The disk thresholds of every bench agent (the harness's; this machine's disk is fuller than
/// kubelet's defaults allow).
const DISK_THRESHOLDS: &str = "nodefs.available<1Mi,nodefs.inodesFree<1%,imagefs.available<1Mi,imagefs.inodesFree<1%";
/// The EvictionActor's period: the node status period, left at its default.
const EVICTION_PERIOD: Duration = Duration::from_secs(10);
/// Each wait of a round (pod Running, eviction, pressure gone).
const STEP_TIMEOUT: Duration = Duration::from_secs(90);
/// Two node status periods and a margin: by then the agent's own MemoryPressure has ended
/// (the next observation after the free, 10 s, and the 1 s transition period).
const PRESSURE_SETTLE: Duration = Duration::from_secs(22);
/// How long MemoryPressure may take to end after the free (two eviction observations, the
/// transition period and a status update take about 20–30 s) before the round moves on to a
/// new agent.
const PRESSURE_TIMEOUT: Duration = Duration::from_secs(45);

/// A BestEffort pod `name` on `node`: no requests, busybox sleeping and leaving on TERM (a plain
/// `sleep` as PID 1 ignores it and would add the 1 s grace period of a hard eviction to T1).
fn victim(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": pods::SLEEP_TRAP_CMD,
            }],
        },
    })
}

/// `--eviction-hard`: `memory.available` under `threshold` bytes (in MiB), and the disk parts.
fn eviction_hard(threshold: u64) -> String {
    format!("memory.available<{}Mi,{DISK_THRESHOLDS}", threshold / MIB)
}

/// The Node's `MemoryPressure` status (`True` / `False`), once the agent has posted it.
fn memory_pressure(api: &ApiServer, node: &str) -> Option<String> {
    let node = api.get("nodes", "", node)?;
    let conditions = node["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "MemoryPressure")?;
    c["status"].as_str().map(str::to_string)
}

/// Polls `check` every 20 ms until it returns `Some`; fails after [`STEP_TIMEOUT`].
fn poll<T>(what: &str, check: impl FnMut() -> anyhow::Result<Option<T>>) -> anyhow::Result<T> {
    poll_for(STEP_TIMEOUT, what, check)
}

/// Polls `check` every 20 ms until it returns `Some`; fails after `timeout`.
fn poll_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let began = Instant::now();
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if began.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `size` bytes allocated and written, held until dropped.
fn allocate(size: u64) -> anyhow::Result<Vec<u8>> {
    let size = usize::try_from(size).context("the allocation does not fit in usize")?;
    let mut hog: Vec<u8> = Vec::new();
    hog.try_reserve_exact(size)
        .with_context(|| format!("allocate {} MiB", size as u64 / MIB))?;
    // Every byte written: every page is resident, as the kernel counts it.
    hog.resize(size, 0xa5);
    Ok(std::hint::black_box(hog))
}

/// The bench's memory during a round: the first allocation, then what it adds whenever
/// `memory.available` climbs back to within half [`OVERSHOOT`] of the threshold, so the agent's
/// reading, whenever it comes, finds the node under it.
struct Hog {
    chunks: Vec<Vec<u8>>,
    first: u64,
    added: u64,
    top_ups: usize,
    /// The highest `memory.available` read after the first allocation; none before a reading.
    highest_available: Option<u64>,
    /// When the bench's own reading first found `memory.available` under the threshold (ns
    /// since the epoch): T0.
    crossed: Option<i64>,
}

impl Hog {
    /// Allocates `size` bytes in [`CHUNK`]s, every byte written, reading `memory.available`
    /// after each: the first reading under `threshold` is T0 (the allocation may take seconds,
    /// and the agent may read the node at any point of it).
    fn allocate(size: u64, threshold: u64) -> anyhow::Result<Hog> {
        let mut hog = Hog {
            chunks: Vec::new(),
            first: size,
            added: 0,
            top_ups: 0,
            highest_available: None,
            crossed: None,
        };
        let mut left = size;
        while left > 0 {
            let chunk = left.min(CHUNK);
            hog.chunks.push(allocate(chunk)?);
            left -= chunk;
            if hog.crossed.is_none() && read_available()? < threshold {
                hog.crossed = Some(now_nanos());
            }
        }
        Ok(hog)
    }

    /// T0: the first reading under the threshold, or now (the allocation done) if none was.
    fn t0(&mut self) -> i64 {
        *self.crossed.get_or_insert_with(now_nanos)
    }

    /// Reads `memory.available` once; when it is within `OVERSHOOT / 2` of `threshold` (or
    /// over it), allocates enough to take it [`OVERSHOOT`] under again, within [`MAX_TOP_UP`].
    fn hold_under(&mut self, threshold: u64) -> anyhow::Result<()> {
        let available = read_available()?;
        self.highest_available = self.highest_available.max(Some(available));
        let more = top_up(available, threshold, self.added);
        if more > 0 {
            self.chunks.push(allocate(more)?);
            self.added += more;
            self.top_ups += 1;
        }
        Ok(())
    }
}

/// `memory.available` as the agent reads it.
fn read_available() -> anyhow::Result<u64> {
    sys::memory_available().context("read memory.available from /proc/meminfo")
}

/// What to add when `memory.available` reads `available` and `added` was added already: none
/// while it stays [`OVERSHOOT`]` / 2` or more under `threshold`, else enough to take it
/// [`OVERSHOOT`] under, within [`MAX_TOP_UP`] in all.
fn top_up(available: u64, threshold: u64, added: u64) -> u64 {
    if available + OVERSHOOT / 2 <= threshold {
        return 0;
    }
    (available - threshold.saturating_sub(OVERSHOOT)).min(MAX_TOP_UP.saturating_sub(added))
}

/// One round's figures, seconds after the allocation was done.
#[derive(Debug, Clone)]
struct Round {
    /// Docker's `kill` of the app container: the agent stops it.
    kill_s: Option<f64>,
    /// Docker's `die` of the app container: T1 − T0.
    die_s: f64,
    /// The bench's allocation, and how long writing it took.
    allocated_mib: u64,
    allocation_s: f64,
    /// `memory.available` before the allocation.
    available_before_mib: u64,
    /// From freeing the memory until the Node's MemoryPressure is False (after True); `None`
    /// if True was never posted.
    pressure_gone_s: Option<f64>,
    /// The pod's status message in the API.
    message: String,
    /// Victims refused at admission before this one ran (pressure left from the last round).
    refused: usize,
    /// The threshold of the agent, in MiB.
    threshold_mib: u64,
    /// This round started a new agent (a new threshold).
    new_agent: bool,
    /// The random wait before the allocation.
    phase_delay_s: f64,
    /// What the bench added to its allocation while it waited, and how many times.
    topped_up_mib: u64,
    top_ups: usize,
    /// The highest `memory.available` read while it waited, less the threshold, in MiB (a
    /// positive value: the node was back over the threshold for a moment); none if the victim
    /// died before the first reading.
    highest_over_threshold_mib: Option<i64>,
}

impl Round {
    fn json(&self) -> Value {
        json!({
            "kill_ms": self.kill_s.map(|s| round3(s * 1000.0)),
            "die_ms": round3(self.die_s * 1000.0),
            "allocated_mib": self.allocated_mib,
            "allocation_s": round3(self.allocation_s),
            "available_before_mib": self.available_before_mib,
            "pressure_gone_after_free_s": self.pressure_gone_s.map(round3),
            "message": self.message,
            "refused_at_admission_before": self.refused,
            "threshold_mib": self.threshold_mib,
            "new_agent": self.new_agent,
            "phase_delay_s": round3(self.phase_delay_s),
            "topped_up_mib": self.topped_up_mib,
            "top_ups": self.top_ups,
            "highest_available_over_threshold_mib": self.highest_over_threshold_mib,
        })
    }
}

/// The time of the victim's app container's `action` event, if seen.
fn app_event(events: &[Event], pod: &str, action: &str) -> Option<i64> {
    events
        .iter()
        .find(|e| e.pod == pod && e.container == "main" && e.action == action)
        .map(|e| e.time_nano)
}

/// Creates victim `name` and waits until its app container runs. A victim refused at
/// admission (the agent's MemoryPressure outlasting the Node's condition in the API, which is
/// posted every 10 s) is deleted and created again; returns how many were refused.
fn start_victim(api: &ApiServer, agent: &BenchAgent, watcher: &Watcher, name: &str) -> anyhow::Result<usize> {
    let mut refused = 0;
    api.create(victim(name, agent.node()))
        .with_context(|| format!("create pod {name}"))?;
    poll(&format!("pod {name} Running in the API"), || {
        let pod = api.get("pods", "default", name).context("the pod is gone")?;
        let status = &pod["status"];
        match status["phase"].as_str() {
            Some("Running") => Ok(Some(())),
            Some("Failed") if status["message"].as_str().is_some_and(|m| m.contains("rejected")) => {
                refused += 1;
                api.delete("pods", "default", name, Some(0))
                    .with_context(|| format!("delete the refused pod {name}"))?;
                std::thread::sleep(Duration::from_secs(1));
                api.create(victim(name, agent.node()))
                    .with_context(|| format!("create pod {name} again"))?;
                Ok(None)
            }
            Some("Failed") => bail!("pod {name} failed before it ran: {status}"),
            _ => Ok(None),
        }
    })?;
    watcher.wait(&format!("{name}'s app container started"), STEP_TIMEOUT, |events| {
        app_event(events, name, "start")
    })?;
    Ok(refused)
}

/// After the memory is freed: waits until the Node's MemoryPressure in the API has been True
/// and is False again; the seconds since `freed` when it was. If True was never posted (the
/// pressure fell between two status updates), waits [`PRESSURE_SETTLE`] for the agent's own
/// state and returns `None`.
fn wait_pressure_gone(api: &ApiServer, node: &str, freed: Instant) -> anyhow::Result<Option<f64>> {
    let mut seen_true = false;
    poll_for(PRESSURE_TIMEOUT, "the Node's MemoryPressure False again", || {
        match memory_pressure(api, node).as_deref() {
            Some("True") => seen_true = true,
            Some("False") if seen_true => return Ok(Some(Some(freed.elapsed().as_secs_f64()))),
            Some("False") if freed.elapsed() > PRESSURE_SETTLE => return Ok(Some(None)),
            _ => {}
        }
        Ok(None)
    })
}

/// Waits until pod `name` is Failed with reason `Evicted`; its message.
fn wait_evicted(api: &ApiServer, name: &str) -> anyhow::Result<String> {
    poll(&format!("pod {name} Failed / Evicted in the API"), || {
        let pod = api.get("pods", "default", name).context("the pod is gone")?;
        let status = &pod["status"];
        match (status["phase"].as_str(), status["reason"].as_str()) {
            (Some("Failed"), Some("Evicted")) => Ok(Some(status["message"].as_str().unwrap_or_default().to_string())),
            (Some("Failed" | "Succeeded"), _) => bail!("pod {name} ended, not evicted: {status}"),
            _ => Ok(None),
        }
    })
}

/// A random wait in [0, [`EVICTION_PERIOD`]) before a round's allocation, so T0 falls at a
/// random point of the EvictionActor's period. Without it the rounds lock to the period: the
/// pressure ends at an observation, and the next allocation follows it after a nearly fixed
/// delay (the victim's start), always the same distance before the next observation.
fn phase_delay() -> Duration {
    let random = u64::from_str_radix(&random_hex(), 16).unwrap_or(0);
    let period_ms = EVICTION_PERIOD.as_millis() as u64;
    Duration::from_millis(random % period_ms)
}

/// One agent under measurement: its threshold and its Docker events.
struct Node {
    /// Dropped first: stops watching before the agent goes.
    watcher: Watcher,
    agent: BenchAgent,
    /// `memory.available` in bytes under which the agent evicts.
    threshold: u64,
}

impl Node {
    /// An agent with its threshold [`THRESHOLD_BELOW`] under `available`, registered, watching
    /// its pods, its Node's MemoryPressure False.
    fn start(ctx: &Ctx, api: &ApiServer, available: u64) -> anyhow::Result<Node> {
        let threshold = available - THRESHOLD_BELOW;
        let kubeconfig = api.kubeconfig_path().display().to_string();
        let hard = eviction_hard(threshold);
        let agent = ctx.start_agent(
            "e1",
            &[
                "--kubeconfig",
                &kubeconfig,
                "--eviction-hard",
                &hard,
                "--eviction-pressure-transition-period",
                "1s",
            ],
        )?;
        wait_watching(api, agent.node())?;
        poll("the Node's MemoryPressure False", || {
            Ok((memory_pressure(api, agent.node()).as_deref() == Some("False")).then_some(()))
        })?;
        let watcher = Watcher::start_for(&ctx.rt, &ctx.docker, &agent.label(), &["start", "kill", "die"]);
        Ok(Node {
            watcher,
            agent,
            threshold,
        })
    }
}

/// True if `available` has drifted (other users of the machine) so far from `threshold` that a
/// round would not cross it cleanly: under [`HEADROOM`] above it, or so far above that the
/// allocation would exceed [`MAX_ALLOCATION`].
fn drifted(threshold: u64, available: u64) -> bool {
    available < threshold + HEADROOM || available - threshold + OVERSHOOT > MAX_ALLOCATION
}

/// Waits for the Docker `die` of `name`'s app container, holding `memory.available` under
/// `threshold` meanwhile (every [`HOLD_PERIOD`]); the event's time.
fn wait_die_holding(watcher: &Watcher, name: &str, hog: &mut Hog, threshold: u64) -> anyhow::Result<i64> {
    let began = Instant::now();
    loop {
        if let Some(t) = app_event(&watcher.snapshot(), name, "die") {
            return Ok(t);
        }
        if began.elapsed() > STEP_TIMEOUT {
            bail!(
                "timed out after {STEP_TIMEOUT:?} waiting for {name}'s app container evicted (die); memory.available at most {} MiB over the threshold meanwhile, {} MiB added in {} top-ups",
                hog.highest_available.map_or(0, |h| (h as i64 - threshold as i64) / MIB as i64),
                hog.added / MIB,
                hog.top_ups
            );
        }
        hog.hold_under(threshold)?;
        std::thread::sleep(HOLD_PERIOD);
    }
}

/// One round on `node`: the victim runs, memory goes under the threshold, the victim is
/// evicted and the memory freed. The pod is left Failed.
fn round(api: &ApiServer, node: &Node, i: usize) -> anyhow::Result<(Round, Instant)> {
    let (agent, watcher, threshold) = (&node.agent, &node.watcher, node.threshold);
    let name = format!("e1-{i}");
    let refused = start_victim(api, agent, watcher, &name)?;
    let delay = phase_delay();
    std::thread::sleep(delay);
    let available = sys::memory_available().context("read memory.available from /proc/meminfo")?;
    if available < threshold + HEADROOM || app_event(&watcher.snapshot(), &name, "die").is_some() {
        bail!(
            "memory.available is {} MiB, less than {} MiB above the threshold ({} MiB), or {name} already stopped: the machine is busy",
            available / MIB,
            HEADROOM / MIB,
            threshold / MIB
        );
    }
    let size = available.saturating_sub(threshold) + OVERSHOOT;
    let began = Instant::now();
    let mut hog = Hog::allocate(size, threshold)?;
    let allocation_s = began.elapsed().as_secs_f64();
    let t0 = hog.t0();
    let died = wait_die_holding(watcher, &name, &mut hog, threshold)
        .with_context(|| format!("log: {}", agent.log_path().display()));
    let (first, added, top_ups, highest) = (hog.first, hog.added, hog.top_ups, hog.highest_available);
    drop(hog);
    let freed = Instant::now();
    let died = died?;
    let kill = app_event(&watcher.snapshot(), &name, "kill");
    let message = wait_evicted(api, &name)?;
    let round = Round {
        kill_s: kill.map(|k| since(t0, k)),
        die_s: since(t0, died),
        allocated_mib: first / MIB,
        allocation_s,
        topped_up_mib: added / MIB,
        top_ups,
        highest_over_threshold_mib: highest.map(|h| (h as i64 - threshold as i64) / MIB as i64),
        available_before_mib: available / MIB,
        threshold_mib: threshold / MIB,
        phase_delay_s: delay.as_secs_f64(),
        pressure_gone_s: None,
        message,
        refused,
        new_agent: false,
    };
    Ok((round, freed))
}

/// E1: rounds of eviction; not run when the machine has under 3 GiB available. The agent is
/// started again (with a new threshold) when `memory.available` drifts away from its threshold
/// or its MemoryPressure does not end.
pub fn eviction(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let read = || sys::memory_available().context("read memory.available from /proc/meminfo");
    let available = read()?;
    if available < MIN_AVAILABLE {
        let why = format!(
            "not run: memory.available {:.1} GiB < {} GiB",
            available as f64 / GIB as f64,
            MIN_AVAILABLE / GIB
        );
        eprintln!("  E1 {why}");
        report.row("E1", "eviction reaction time", why.clone(), "—".into());
        report.figures("e1_eviction", json!({"not_run": why}));
        return Ok(());
    }
    let api = ApiServer::start_with(ApiServerConfig::default()).context("start the in-memory API server")?;
    let mut node = Node::start(ctx, &api, available)?;
    let mut stale = false;
    let mut rounds = Vec::new();
    for i in 0..ctx.settings.eviction_rounds {
        let available = read()?;
        let new_agent = stale || drifted(node.threshold, available);
        if new_agent {
            if available < MIN_AVAILABLE {
                bail!("E1 round {i}: memory.available fell to {} MiB", available / MIB);
            }
            let old = std::mem::replace(&mut node, Node::start(ctx, &api, available)?);
            drop(old.watcher);
            ctx.finish_agent(old.agent)?;
        }
        let (mut r, freed) = round(&api, &node, i).with_context(|| format!("E1 round {i}"))?;
        r.new_agent = new_agent;
        // A MemoryPressure that outlasts the timeout (the machine under the threshold on its
        // own) is no failure: the next round gets a new agent.
        let gone = wait_pressure_gone(&api, node.agent.node(), freed);
        stale = gone.is_err();
        r.pressure_gone_s = gone.unwrap_or(None);
        api.delete("pods", "default", &format!("e1-{i}"), Some(0))
            .with_context(|| format!("delete pod e1-{i}"))?;
        eprintln!(
            "  E1 round {i}{}: allocated {} MiB in {:.2} s (+{} MiB in {} top-ups; highest memory.available {} MiB from the threshold); → kill {}, → die {}; MemoryPressure False {} after the free",
            if new_agent { " (new agent)" } else { "" },
            r.allocated_mib,
            r.allocation_s,
            r.topped_up_mib,
            r.top_ups,
            r.highest_over_threshold_mib.map_or("n/a (died before a reading)".into(), |h| h.to_string()),
            ms(r.kill_s),
            ms(Some(r.die_s)),
            r.pressure_gone_s
                .map_or("(True never posted, or not False in time)".to_string(), |s| format!("{s:.1} s"))
        );
        rounds.push(r);
    }
    drop(node.watcher);
    ctx.finish_agent(node.agent)?;
    drop(api);
    report_rounds(report, &rounds);
    Ok(())
}

/// The table's rows and the figures.
fn report_rounds(report: &mut Report, rounds: &[Round]) {
    let die = Samples::new(rounds.iter().map(|r| r.die_s).collect());
    let kill = Samples::new(rounds.iter().filter_map(|r| r.kill_s).collect());
    let gone = Samples::new(rounds.iter().filter_map(|r| r.pressure_gone_s).collect());
    let (d50, d99) = die.p50_p99().unzip();
    let (k50, k99) = kill.p50_p99().unzip();
    let agents = rounds.iter().filter(|r| r.new_agent).count() + 1;
    let scenario = format!("E1 (memory.available < available at start − 1 GiB, 10 s period; {agents} agent(s))");
    report.row(
        &scenario,
        &format!(
            "threshold crossed (the bench's first reading under it) → victim's app container died (Docker die), p50 / p99 ({} rounds)",
            rounds.len()
        ),
        format!("{} / {}", ms(d50), ms(d99)),
        "—".into(),
    );
    report.row(
        &scenario,
        "threshold crossed → stop sent (Docker kill), p50 / p99",
        format!("{} / {}", ms(k50), ms(k99)),
        "—".into(),
    );
    let refused: usize = rounds.iter().map(|r| r.refused).sum();
    report.row(
        &scenario,
        "victims Failed / Evicted in the API │ memory freed → Node MemoryPressure False, p50 │ victims refused at admission",
        format!(
            "{n} of {n} │ {} ({} of {n} rounds posted True) │ {refused}",
            gone.median().map_or("n/a".into(), |s| format!("{s:.1} s")),
            gone.len(),
            n = rounds.len(),
        ),
        "—".into(),
    );
    report.figures(
        "e1_eviction",
        json!({
            "agents": agents,
            "eviction_period_s": EVICTION_PERIOD.as_secs(),
            "pressure_transition_period_s": 1,
            "to_die": die.json_ms(),
            "to_kill": kill.json_ms(),
            "pressure_gone_after_free": gone.json_ms(),
            "rounds": rounds.iter().map(Round::json).collect::<Vec<_>>(),
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The victim is BestEffort (no resources) and bound to the node; the flag keeps the disk
    /// thresholds of every bench agent.
    #[test]
    fn the_victim_is_best_effort_and_the_flag_keeps_the_disk_thresholds() {
        let p = victim("e1-0", "node-a");
        assert_eq!(p["spec"]["nodeName"], "node-a");
        assert!(p["spec"]["containers"][0]["resources"].is_null());
        assert_eq!(
            eviction_hard(5 * GIB + 3 * MIB),
            "memory.available<5123Mi,nodefs.available<1Mi,nodefs.inodesFree<1%,imagefs.available<1Mi,imagefs.inodesFree<1%"
        );
    }

    /// A new agent when memory.available is near the threshold or far above it; none for the
    /// usual 1 GiB above.
    #[test]
    fn drift_is_too_near_or_too_far_from_the_threshold() {
        let threshold = 10 * GIB;
        assert!(!drifted(threshold, threshold + GIB));
        assert!(drifted(threshold, threshold + 100 * MIB));
        assert!(drifted(threshold, threshold + 3 * GIB));
        assert!(!drifted(threshold, threshold + 2 * GIB));
    }

    /// The random wait stays within one period and varies.
    #[test]
    fn the_phase_delay_is_within_one_period() {
        let delays: Vec<Duration> = (0..50).map(|_| phase_delay()).collect();
        assert!(delays.iter().all(|d| *d < EVICTION_PERIOD));
        assert!(delays.iter().any(|d| *d != delays[0]));
    }

    /// Nothing is added while memory.available stays half the overshoot under the threshold;
    /// when it climbs back, enough to be the whole overshoot under, never past the cap.
    #[test]
    fn the_top_up_keeps_the_node_under_the_threshold() {
        let threshold = 10 * GIB;
        assert_eq!(top_up(threshold - OVERSHOOT, threshold, 0), 0);
        assert_eq!(top_up(threshold - OVERSHOOT / 2, threshold, 0), 0);
        assert_eq!(top_up(threshold - 100 * MIB, threshold, 0), OVERSHOOT - 100 * MIB);
        assert_eq!(top_up(threshold + 200 * MIB, threshold, 0), OVERSHOOT + 200 * MIB);
        assert_eq!(top_up(threshold + 200 * MIB, threshold, MAX_TOP_UP - MIB), MIB);
        assert_eq!(top_up(threshold + 200 * MIB, threshold, MAX_TOP_UP), 0);
    }

    /// The allocation is the size asked, every byte written.
    #[test]
    fn the_allocation_is_written() {
        let hog = allocate(3 * 4096 + 1).expect("allocate");
        assert_eq!(hog.len(), 3 * 4096 + 1);
        assert!(hog.iter().all(|b| *b == 0xa5));
    }
}
