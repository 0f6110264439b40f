//! Starts everything, top to bottom: Docker, the sandbox image, the actor system, the HTTP
//! servers; then waits for SIGTERM or SIGINT.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use actix_web::dev::{Server, ServerHandle};
use anyhow::Context as _;
use dockerlet_actors::container_gc::ContainerGcConfig;
use dockerlet_actors::eviction::EvictionConfig;
use dockerlet_actors::eviction_memcg::MemcgConfig;
use dockerlet_actors::image_gc::ImageGcConfig;
use dockerlet_actors::node_shutdown::NodeShutdownConfig;
use dockerlet_actors::node_status::NodeStatusConfig;
use dockerlet_actors::oom_watcher::OomWatcherConfig;
use dockerlet_actors::pleg::EVENTED_RELIST_PERIOD;
use dockerlet_actors::pod_network::Networked;
use dockerlet_actors::pod_worker::PodWorkerConfig;
use dockerlet_actors::stats::{StatsConfig, StatsPaths, SystemCgroupNames};
use dockerlet_actors::supervisor::{Mode, Supervisor, SupervisorConfig};
use dockerlet_actors::system_cgroups::SystemCgroupsConfig;
use dockerlet_cni::template::ConfTemplate;
use dockerlet_cni::Cni;
use dockerlet_host::cgroup::systemd::{SliceManager, SystemdSlices};
use dockerlet_host::cgroup::tree::PodCgroups;
use dockerlet_host::signals::FsStats;
use dockerlet_http::Handles;
use dockerlet_kube::certificates::bootstrap::load_client_cert;
use dockerlet_kube::certificates::{CertificateRotation, ClientCertificates};
use dockerlet_kube::{KubeApi, KubeClient};
use dockerlet_messages::debug::HealthCell;
use dockerlet_metrics::{BuildInfo, Metrics};
use dockerlet_pod::cgroup::{CgroupDriver, CgroupNaming};
use dockerlet_pod::security::SecurityConfig;
use dockerlet_runtime::docker::DockerRuntime;
use dockerlet_runtime::measured::Measured;
use dockerlet_runtime::{ContainerLogConfig, ContainerRuntime, Containers, FileLogDriver, Images};
use k8s_openapi::api::core::v1::Node;
use tokio::signal::unix::{signal, SignalKind};

use crate::config::{AgentConfig, NetworkPlugin, NetworkSettings};

/// How long to wait for the Docker engine at start (kubelet: 30 s for its runtime).
const RUNTIME_WAIT: Duration = Duration::from_secs(30);

/// Run the agent until a signal arrives: the host prepared (Docker, cgroups, sandbox image),
/// the API server reached in cluster mode, the Node as it will be registered, the actors, the
/// HTTP servers; then wait for SIGTERM or SIGINT and stop the servers (pods keep running).
pub async fn run(mut config: AgentConfig) -> anyhow::Result<()> {
    // Held until the agent returns; with --exit-on-lock-contention, watched.
    let lock = match &config.process.lock {
        Some(file) => Some(crate::node_lock::FileLock::acquire(&file.path).await?),
        None => None,
    };
    let contention = match (&lock, &config.process.lock) {
        (Some(lock), Some(file)) if file.exit_on_contention => Some(lock.contention()?),
        _ => None,
    };
    let mut host = prepare_host(&mut config).await?;
    let claim = host.claim.take();
    let served = serve(config, host, contention).await;
    if let Some(claim) = claim {
        claim.release().await;
    }
    served
}

/// The agent on a prepared host, until a signal (or lock contention) stops it.
async fn serve(
    config: AgentConfig,
    host: Host,
    contention: Option<tokio::sync::oneshot::Receiver<String>>,
) -> anyhow::Result<()> {
    let (api, certificates) = connect_api(&config).await?;
    let facts = node_facts(&config, &host).await;
    let initial_node = crate::node::node(&facts);
    let mode = decide_mode(&config, api, &initial_node, host.network.as_ref());
    let kube = mode.api().cloned();
    let actors = start_actors(&config, &host, &facts, initial_node, mode, certificates).await;
    crate::memory::spawn_trimmer(crate::memory::TRIM_EVERY);
    let servers = start_http(&config, actors, host.runtime, kube.as_ref()).await?;
    until_signal(contention).await?;
    for server in servers {
        server.stop(false).await;
    }
    Ok(())
}

/// What the agent found and set up on the host before any actor starts.
struct Host {
    /// The node name's claim on the engine, released when the agent stops.
    claim: Option<crate::node_claim::NodeClaim>,
    /// `--root-dir`, absolute (Docker bind mounts need an absolute host path).
    root_dir: PathBuf,
    /// The Docker engine.
    runtime: DockerRuntime,
    /// The engine's own cgroup driver (cgroupfs when it names none), for the stats.
    engine_driver: CgroupDriver,
    /// The pod cgroup tree and the system cgroups.
    cgroups: HostCgroups,
    /// The sandbox image, provided.
    sandbox_image: String,
    /// The node's IP (`--node-ip`, or the first physical-looking interface's).
    host_ip: String,
    /// The CNI pod network; none: Docker's bridge.
    network: Option<Arc<Cni>>,
}

/// The cgroups set up at start.
struct HostCgroups {
    /// How pod cgroups are named under `--cgroup-root` with the driver in use.
    naming: CgroupNaming,
    /// The pod cgroup tree; none with `--cgroups-per-qos=false`.
    pods: Option<Arc<PodCgroups>>,
    /// `--kubelet-cgroups` and `--system-cgroups`, kept by the SystemCgroupsActor.
    system: Option<SystemCgroupsConfig>,
    /// `kernelMemcgNotification`'s cgroups (v1 memory controller); none when it is off.
    memcg: Option<MemcgConfig>,
}

/// The state directory, the kernel checks, Docker (its cgroup driver recorded in
/// `config.cgroups.driver`), the sandbox image, the node name's claim on the engine, the pod and
/// system cgroups, in this order; any failure stops the start.
async fn prepare_host(config: &mut AgentConfig) -> anyhow::Result<Host> {
    std::fs::create_dir_all(&config.process.root_dir)
        .with_context(|| format!("--root-dir {}", config.process.root_dir.display()))?;
    // Docker bind mounts need an absolute host path.
    let root_dir = std::fs::canonicalize(&config.process.root_dir)
        .with_context(|| format!("--root-dir {}", config.process.root_dir.display()))?;
    crate::node_setup::check_kernel(config)?;
    let (runtime, engine_driver) = connect_runtime(config).await?;
    let sandbox_image = runtime
        .ensure_sandbox_image(
            config.images.sandbox_image.as_deref(),
            &sandbox_credentials(config.images.sandbox_image.as_deref(), &root_dir),
        )
        .await
        .context("--pod-infra-container-image: cannot provide the sandbox image")?;
    // Before anything touches cgroups or containers: no other agent may manage this node here.
    let qos_root = config.cgroups.per_qos.then_some(config.cgroups.root.as_str());
    let claim =
        crate::node_claim::NodeClaim::take(&runtime, &config.node_name, &sandbox_image, &root_dir, qos_root).await?;
    // A start that fails from here on gives the claim back.
    let (cgroups, network) = match set_up_node(config, &runtime).await {
        Ok(set_up) => set_up,
        Err(e) => {
            claim.release().await;
            return Err(e);
        }
    };
    Ok(Host {
        claim: Some(claim),
        root_dir,
        runtime,
        engine_driver,
        cgroups,
        sandbox_image,
        host_ip: config.registration.node_ip.unwrap_or_else(detect_node_ip).to_string(),
        network,
    })
}

/// The node's cgroups and pod network, once the node is claimed.
async fn set_up_node(
    config: &mut AgentConfig,
    runtime: &DockerRuntime,
) -> anyhow::Result<(HostCgroups, Option<Arc<Cni>>)> {
    let cgroups = HostCgroups::set_up(config, runtime).await?;
    if let (Some(template), Some(cidr)) = (conf_template(&config.network), &config.network.pod_cidr) {
        if let Some(path) = template.render(cidr)? {
            tracing::info!(pod_cidr = %cidr, file = %path.display(), "CNI configuration written for --pod-cidr");
        }
    }
    let network = pod_network(&config.network);
    if let Some(cni) = &network {
        dockerlet_actors::pod_network::sweep(runtime, cni).await;
    }
    Ok((cgroups, network))
}

/// `--cni-conf-template` with the directory it writes to.
fn conf_template(settings: &NetworkSettings) -> Option<ConfTemplate> {
    settings.conf_template.clone().map(|template| ConfTemplate {
        template,
        conf_dir: settings.cni.conf_dir.clone(),
    })
}

/// The CNI pod network, when `--network-plugin=cni` or, without the flag, when
/// `--cni-conf-dir` holds a usable configuration now; none: Docker's bridge.
fn pod_network(settings: &NetworkSettings) -> Option<Arc<Cni>> {
    let cni = Cni::new(settings.cni.clone());
    let loaded = cni.reload();
    let use_cni = match settings.plugin {
        NetworkPlugin::Cni => true,
        NetworkPlugin::DockerBridge => false,
        NetworkPlugin::Detect => matches!(loaded, Ok(Some(_))),
    };
    let conf_dir = settings.cni.conf_dir.display();
    if !use_cni {
        tracing::info!(cni_conf_dir = %conf_dir, "pod network: Docker's bridge");
        return None;
    }
    match &loaded {
        Ok(Some(n)) => tracing::info!(network = %n.name, file = %n.path.display(), "pod network: CNI"),
        Ok(None) => tracing::warn!(cni_conf_dir = %conf_dir, "pod network: CNI, not ready: cni config uninitialized"),
        Err(e) => tracing::warn!(error = %e, "pod network: CNI, not ready"),
    }
    Some(Arc::new(cni))
}

/// Docker, waited for up to [`RUNTIME_WAIT`], and the cgroup driver checked against the
/// engine's (`config.cgroups.driver` set to the one in use); with the engine's own driver. Its
/// default log driver must write files; every container is then created with it and the
/// rotation of `--container-log-max-size`/`--container-log-max-files`.
async fn connect_runtime(config: &mut AgentConfig) -> anyhow::Result<(DockerRuntime, CgroupDriver)> {
    let runtime = connect(&config.pod_sync.runtime_endpoint).await?;
    let docker_driver = runtime.cgroup_driver().await.context("docker info")?;
    config.cgroups.driver = Some(cgroup_driver(config.cgroups.driver, &docker_driver)?);
    let log_driver = file_log_driver(&runtime.logging_driver().await.context("docker info")?)?;
    let runtime = runtime.with_log_config(ContainerLogConfig {
        driver: log_driver,
        rotation: config.container_logs.rotation,
    });
    tracing::info!(
        driver = log_driver.name(),
        max_size = %config.container_logs.max_size,
        max_files = config.container_logs.max_files,
        "containers log through Docker's file driver, rotated by Docker"
    );
    Ok((
        runtime,
        CgroupDriver::parse(&docker_driver).unwrap_or(CgroupDriver::Cgroupfs),
    ))
}

/// Docker's default log driver is not one that writes files on the node.
#[derive(Debug, thiserror::Error)]
#[error(
    "Docker's default log driver {0:?} is not file-based: dockerlet needs \"json-file\" or \"local\" (as kubelet with cri-dockerd: kubectl logs and /var/log/pods read the files Docker keeps, rotated by --container-log-max-size and --container-log-max-files); set \"log-driver\" in Docker's daemon.json"
)]
struct LogDriverError(String);

/// The file-based driver Docker logs with by default (`LoggingDriver` of `docker info`);
/// any other is refused.
fn file_log_driver(name: &str) -> Result<FileLogDriver, LogDriverError> {
    FileLogDriver::parse(name).ok_or_else(|| LogDriverError(name.to_string()))
}

impl HostCgroups {
    /// The pod cgroup tree, then the system cgroups.
    async fn set_up(config: &AgentConfig, runtime: &DockerRuntime) -> anyhow::Result<Self> {
        // Always set by `connect_runtime` (cgroupfs, kubelet's default, is never reached here).
        let driver = config.cgroups.driver.unwrap_or(CgroupDriver::Cgroupfs);
        let (naming, pods) = pod_cgroups(config, driver, runtime).await?;
        Ok(HostCgroups {
            memcg: memcg_config(config, &naming)?,
            naming,
            pods,
            system: system_cgroups(config).await?,
        })
    }
}

/// `kernelMemcgNotification: true`: the v1 memory controller's root and `kubepods`; refused
/// on cgroup v2, which has no usage thresholds (`cgroup.event_control`) — kubelet disables the
/// notifier there without a word.
fn memcg_config(config: &AgentConfig, naming: &CgroupNaming) -> anyhow::Result<Option<MemcgConfig>> {
    if !config.eviction.memcg_notification {
        return Ok(None);
    }
    let layout = dockerlet_host::cgroup::CgroupLayout::detect().context("kernelMemcgNotification")?;
    let root = match layout.version() {
        dockerlet_host::cgroup::CgroupVersion::V1 => layout.dir("memory", "/"),
        dockerlet_host::cgroup::CgroupVersion::V2 => None,
    };
    let Some(root) = root else {
        anyhow::bail!(
            "kernelMemcgNotification: true is not supported on this host: memory usage thresholds (cgroup.event_control) exist on cgroup v1 only, and this host runs cgroup v2"
        );
    };
    let kubepods = config
        .cgroups
        .per_qos
        .then(|| layout.dir("memory", &naming.kubepods()))
        .flatten();
    Ok(Some(MemcgConfig { root, kubepods }))
}

/// The API server in cluster mode (`--kubeconfig` or `--in-cluster`); none standalone. With
/// `--bootstrap-kubeconfig`, the client certificate is asked for first when `--kubeconfig`
/// has none that is valid (kubelet's `LoadClientCert`); with `rotateCertificates` the client
/// presents the rotating certificate, whose manager is returned too.
async fn connect_api(
    config: &AgentConfig,
) -> anyhow::Result<(Option<Arc<dyn KubeClient>>, Option<Arc<ClientCertificates>>)> {
    let (qps, burst) = config.cluster.kube_api_limits;
    let node = &config.node_name;
    let certs = &config.cluster.client_certificate;
    Ok(match (&config.cluster.kubeconfig, &config.cluster.in_cluster) {
        (Some(path), _) => {
            if let Some(bootstrap) = &certs.bootstrap_kubeconfig {
                let made = load_client_cert(path, bootstrap, &certs.cert_dir, node)
                    .await
                    .context("TLS bootstrap (--bootstrap-kubeconfig)")?;
                if let Some(csr) = made {
                    tracing::info!(csr = %csr, kubeconfig = %path.display(), "client certificate issued; kubeconfig written");
                }
            }
            if certs.rotate {
                let rotating = ClientCertificates::load(path, &certs.cert_dir, node)
                    .await
                    .context("client certificate rotation (rotateCertificates)")?;
                let api = KubeApi::with_client(rotating.client(), node, qps, burst);
                (Some(Arc::new(api) as Arc<dyn KubeClient>), Some(Arc::new(rotating)))
            } else {
                let api = KubeApi::connect(path, node, qps, burst).await?;
                (Some(Arc::new(api) as Arc<dyn KubeClient>), None)
            }
        }
        (None, Some(dir)) => (
            Some(Arc::new(KubeApi::connect_in_cluster(dir, node, qps, burst).await?) as Arc<dyn KubeClient>),
            None,
        ),
        (None, None) => (None, None),
    })
}

/// The Node as registered: admission checks pods against it in both modes (kubelet's
/// initialNode), and in cluster mode it is what the agent registers.
async fn node_facts(config: &AgentConfig, host: &Host) -> crate::node::NodeFacts {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    crate::node::NodeFacts {
        name: config.node_name.clone(),
        ip: host.host_ip.clone(),
        labels: config.registration.labels.clone(),
        cpus,
        memory_bytes: node_memory_bytes(),
        docker_version: host.runtime.version().await.unwrap_or_default(),
        port: config.servers.port,
        ephemeral_storage_bytes: FsStats::of(&host.root_dir).map(|f| f.capacity_bytes),
        taints: config.registration.taints.clone(),
        reserved: config.reserved.clone(),
        eviction: config.eviction.settings.hard.clone(),
        max_pods: config.node.pods_capacity(cpus),
    }
}

/// Standalone or cluster, decided once here: with an API server the agent registers
/// `initial_node` and keeps its status and Lease.
fn decide_mode(
    config: &AgentConfig,
    api: Option<Arc<dyn KubeClient>>,
    initial_node: &Node,
    network: Option<&Arc<Cni>>,
) -> Mode {
    match api {
        Some(api) => Mode::Cluster {
            api,
            node: Box::new(NodeStatusConfig {
                node: initial_node.clone(),
                register: config.registration.register_node,
                update_frequency: config.registration.status_update_frequency,
                report_frequency: config.registration.status_report_frequency,
                lease_duration_seconds: config.registration.lease_duration_seconds,
                max_images: config.registration.status_max_images,
                network: network.cloned(),
                conf_template: conf_template(&config.network),
            }),
        },
        None => Mode::Standalone,
    }
}

/// The running actor system and what the HTTP servers share with it.
struct Actors {
    supervisor: Addr<Supervisor>,
    health: HealthCell,
    metrics: Arc<Metrics>,
}

/// The Supervisor and, through it, every actor.
async fn start_actors(
    config: &AgentConfig,
    host: &Host,
    facts: &crate::node::NodeFacts,
    initial_node: Node,
    mode: Mode,
    certificates: Option<Arc<ClientCertificates>>,
) -> Actors {
    // Docker may report a path of another mount namespace (the agent in a container).
    let image_dir = host.runtime.root_dir().await.filter(|p| p.exists());
    let eviction = EvictionConfig {
        node_name: config.node_name.clone(),
        thresholds: config.eviction.settings.clone(),
        transition_period: config.eviction.pressure_transition_period,
        // Observed as often as the node status is written, so each heartbeat reports a fresh one.
        period: config.registration.status_update_frequency,
        observe: EvictionConfig::observe_node(host.root_dir.clone(), image_dir.clone(), host.cgroups.pods.clone()),
        memcg: host.cgroups.memcg.clone(),
    };
    let stats = stats_config(config, host, image_dir.clone());
    let image_gc = image_gc_config(config, host, image_dir.clone());
    tracing::info!(node = %config.node_name, host_ip = %host.host_ip, sandbox_image = %host.sandbox_image, "starting dockerlet");
    let mut metrics = metrics(&config.node_name);
    if certificates.is_some() {
        metrics.register_client_certificate_metrics();
    }
    let metrics = Arc::new(metrics);
    let worker = worker_config(config, host, facts, mode.api().cloned(), image_dir, &metrics).await;
    let container_gc = ContainerGcConfig {
        node_name: config.node_name.clone(),
        policy: config.container_gc.policy,
        period: config.container_gc.period,
        log_links: worker.log_links.clone(),
    };
    let health = HealthCell::default();
    let supervisor = Supervisor::start(
        SupervisorConfig {
            worker: Arc::new(worker),
            manifest_path: config.file_source.path.clone(),
            file_check_frequency: config.file_source.check_frequency,
            relist_period: EVENTED_RELIST_PERIOD,
            fault_injection: config.process.fault_injection,
            mode,
            manifest_url: config.manifest_url.clone(),
            eviction,
            image_gc,
            oom: Some(OomWatcherConfig {
                kmsg_path: config.process.kmsg_path.clone(),
                checkpoint_dir: host.root_dir.join("oom_watcher"),
                node_name: config.node_name.clone(),
            }),
            stats: Some(stats),
            system_cgroups: host.cgroups.system.clone(),
            events: config.cluster.event_limits,
            health: health.clone(),
            node: Arc::new(initial_node),
            node_shutdown: (!config.shutdown_groups.is_empty()).then(|| NodeShutdownConfig {
                groups: config.shutdown_groups.clone(),
                logind_conf_dir: dockerlet_host::logind::LOGIND_CONF_DIR.into(),
                state_dir: host.root_dir.clone(),
            }),
            container_gc: Some(container_gc),
            client_certificates: certificates.map(|c| c as Arc<dyn CertificateRotation>),
        },
        pod_runtime(host, &metrics),
    );
    Actors {
        supervisor,
        health,
        metrics,
    }
}

/// Docker as the actors use it: every call measured, and with CNI the sandboxes' attachments
/// kept in step ([`Networked`]).
fn pod_runtime(host: &Host, metrics: &Arc<Metrics>) -> Arc<dyn ContainerRuntime> {
    let measured: Arc<dyn ContainerRuntime> = Arc::new(Measured::new(host.runtime.clone(), metrics.clone()));
    match &host.network {
        Some(cni) => {
            // kubelet puts the node IP's family first in a dual-stack pod's podIPs.
            let node_ipv6 = host.host_ip.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_ipv6());
            Arc::new(Networked::new(measured, cni.clone(), metrics.clone(), node_ipv6))
        }
        None => measured,
    }
}

/// Image garbage collection on Docker's filesystem, the sandbox image pinned; detection and the
/// image list only when the thresholds turn collection off (kubelet's `StartGarbageCollection`
/// does not start the loop; its image manager still runs).
fn image_gc_config(config: &AgentConfig, host: &Host, image_dir: Option<PathBuf>) -> Option<ImageGcConfig> {
    let settings = config.image_gc;
    let collect = !settings.policy.disabled();
    if !collect {
        tracing::info!("ImageGCHighThresholdPercent is set 100 and ImageMaximumGCAge is 0, Disable image GC");
    }
    Some(ImageGcConfig {
        policy: settings.policy,
        collect,
        period: settings.period,
        records_path: host.root_dir.join(dockerlet_host::image_gc::RECORDS_FILE),
        pinned: vec![host.sandbox_image.clone()],
        image_fs: ImageGcConfig::image_fs_of(host.root_dir.clone(), image_dir),
        node_name: config.node_name.clone(),
    })
}

/// Statistics housekeeping: the node's and Docker's directories, the cgroup layout (none: the
/// node only, said once), the system cgroups, the period.
fn stats_config(config: &AgentConfig, host: &Host, image_dir: Option<PathBuf>) -> StatsConfig {
    StatsConfig {
        paths: StatsPaths {
            node_name: config.node_name.clone(),
            root_dir: host.root_dir.clone(),
            docker_root: image_dir,
            layout: match dockerlet_host::cgroup::CgroupLayout::detect() {
                Ok(layout) => Some(layout),
                Err(e) => {
                    tracing::warn!(error = %e, "no cgroup statistics: /stats/summary reports the node only");
                    None
                }
            },
            system: SystemCgroupNames {
                kubelet: config.cgroups.kubelet_cgroups.clone(),
                runtime: config.cgroups.runtime_cgroups.clone(),
                misc: config.cgroups.system_cgroups.clone(),
            },
            engine_cgroup_driver: host.engine_driver,
        },
        interval: config.pod_sync.housekeeping_interval,
    }
}

/// The settings every PodWorker shares; `api` in cluster mode.
async fn worker_config(
    config: &AgentConfig,
    host: &Host,
    facts: &crate::node::NodeFacts,
    api: Option<Arc<dyn KubeClient>>,
    image_dir: Option<PathBuf>,
    metrics: &Arc<Metrics>,
) -> PodWorkerConfig {
    PodWorkerConfig {
        node_name: config.node_name.clone(),
        host_ip: host.host_ip.clone(),
        sandbox_image: host.sandbox_image.clone(),
        backoff: config.pod_sync.backoff,
        container_gc: config.container_gc.policy,
        sync_frequency: config.pod_sync.sync_frequency,
        node_memory_bytes: node_memory_bytes(),
        allocatable: crate::node::allocatable(facts),
        min_oom_score_adj: protect_from_oom_killer(),
        root_dir: host.root_dir.clone(),
        api,
        log_links: log_links(&host.runtime, &config.pod_logs_dir, image_dir.as_deref()).await,
        dns: config.dns.clone(),
        security: SecurityConfig {
            seccomp_default: config.security.seccomp_default,
            allowed_unsafe_sysctls: config.security.allowed_unsafe_sysctls.clone(),
            apparmor_enabled: dockerlet_host::security::apparmor_enabled(),
        },
        metrics: metrics.clone(),
        cgroup_naming: host.cgroups.naming.clone(),
        single_process_oom_kill: config.cgroups.single_process_oom_kill,
        cgroups: host.cgroups.pods.clone(),
        image_pulls: config.images.pulls,
        cpu_cfs_quota: config.node.cpu_cfs_quota,
        network: host.network.clone(),
    }
}

/// The HTTP servers, started: healthz, read-only, the kubelet API, debug (each when enabled);
/// their handles, to stop them.
async fn start_http(
    config: &AgentConfig,
    actors: Actors,
    runtime: DockerRuntime,
    kube: Option<&Arc<dyn KubeClient>>,
) -> anyhow::Result<Vec<ServerHandle>> {
    let supervisor = actors.supervisor;
    let mut handles = Handles {
        pods: supervisor.clone().recipient(),
        running: supervisor.clone().recipient(),
        sandbox: supervisor.clone().recipient(),
        health: actors.health,
        debug: supervisor.clone().recipient(),
        stats: supervisor.clone().recipient(),
        faults: config.process.fault_injection.then(|| supervisor.clone().recipient()),
        metrics: actors.metrics,
        logs_port: None,
    };
    let mut servers = Vec::new();
    if let Some(addr) = config.servers.healthz {
        servers.push(dockerlet_http::serve("healthz", addr, handles.clone(), dockerlet_http::healthz::configure)?.0);
    }
    if let Some(addr) = config.servers.read_only {
        servers
            .push(dockerlet_http::serve("read-only", addr, handles.clone(), dockerlet_http::read_only::configure)?.0);
    }
    if let Some(api) = &config.kubelet_api {
        let (server, bound) = kubelet_api_server(config, api, handles.clone(), runtime, kube).await?;
        handles.logs_port = Some(bound.port());
        servers.push(server);
    }
    servers.push(dockerlet_http::serve("debug", config.servers.debug, handles, dockerlet_http::debug::configure)?.0);
    let stoppers = servers.iter().map(|s| s.handle()).collect();
    for server in servers {
        actix::spawn(server);
    }
    Ok(stoppers)
}

/// The kubelet API on `--address:--port`: TLS (certificate files read or written off the event
/// loop), authentication and authorization, and the streaming runtime calls over Docker.
async fn kubelet_api_server(
    config: &AgentConfig,
    api: &crate::config::KubeletApiConfig,
    handles: Handles,
    runtime: DockerRuntime,
    kube: Option<&Arc<dyn KubeClient>>,
) -> anyhow::Result<(Server, SocketAddr)> {
    let settings = api.tls.clone();
    let tls = tokio::task::spawn_blocking(move || dockerlet_http::kubelet_api::tls::server_config(&settings))
        .await
        .context("kubelet API TLS set-up panicked")?
        .with_context(|| format!("kubelet API on {}", api.address))?;
    let auth = kubelet_api_auth(&config.node_name, api, kube)?;
    let state = dockerlet_http::kubelet_api::KubeletApi {
        handles,
        exec: Arc::new(runtime.clone()),
        attach: Arc::new(runtime.clone()),
        port_forward: Arc::new(crate::port_forward::NetnsPortForward {
            docker: runtime.clone(),
        }),
        logs: Arc::new(runtime),
        configz: Arc::new(crate::configz::configz(config)),
        stream_idle_timeout: api.stream_idle_timeout,
        debug_routes: api.debug_routes,
    };
    Ok(dockerlet_http::kubelet_api::serve(api.address, state, auth, tls)?)
}

/// Until SIGTERM or SIGINT.
async fn until_signal(contention: Option<tokio::sync::oneshot::Receiver<String>>) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("install SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("install SIGINT handler")?;
    // The signals are awaited on a task of their own: this future is polled at every wake-up of
    // the event loop (it is the loop's `run_until`), a oneshot costs nothing to poll there.
    let (stop, stopped) = tokio::sync::oneshot::channel();
    actix::spawn(async move {
        let contention = async {
            match contention {
                Some(seen) => seen.await.unwrap_or_default(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: stopping; pods keep running"),
            _ = int.recv() => tracing::info!("SIGINT: stopping; pods keep running"),
            what = contention => tracing::info!(event = %what, "lock file contention (--exit-on-lock-contention): stopping; pods keep running"),
        }
        let _ = stop.send(());
    });
    let _ = stopped.await;
    Ok(())
}

/// The kubelet API's authenticator and authorizer; the webhooks review through `kube` (config
/// refuses them without an API server, so `kube` is there when they are asked for).
fn kubelet_api_auth(
    node_name: &str,
    api: &crate::config::KubeletApiConfig,
    kube: Option<&Arc<dyn KubeClient>>,
) -> anyhow::Result<dockerlet_http::kubelet_api::auth::AuthConfig> {
    use dockerlet_http::kubelet_api::auth::{AuthConfig, AuthorizationMode, Authorizer};
    use dockerlet_http::kubelet_api::webhook::{Reviewer, TokenAuthenticator, WebhookAuthorizer};
    let reviewer = || -> anyhow::Result<Arc<dyn Reviewer>> {
        let kube = kube.context("the kubelet API's webhooks need an API server (--kubeconfig)")?;
        Ok(Arc::new(crate::reviews::ApiReviewer(kube.clone())))
    };
    let tokens = match api.token_webhook {
        Some(ttl) => Some(TokenAuthenticator::new(reviewer()?, ttl)),
        None => None,
    };
    let authorizer = match api.authorization {
        AuthorizationMode::AlwaysAllow => Authorizer::AlwaysAllow,
        AuthorizationMode::AlwaysDeny => Authorizer::AlwaysDeny,
        AuthorizationMode::Webhook {
            authorized_ttl,
            unauthorized_ttl,
        } => Authorizer::Webhook(WebhookAuthorizer::new(reviewer()?, authorized_ttl, unauthorized_ttl)),
    };
    Ok(AuthConfig {
        node_name: node_name.to_string(),
        anonymous: api.anonymous,
        tokens,
        authorizer,
    })
}

/// The agent's metrics, with the process collector and the build it runs.
fn metrics(node: &str) -> Metrics {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    let build = BuildInfo {
        compiler: "rustc".to_string(),
        git_version: format!("v{version}"),
        major: parts.next().unwrap_or_default().to_string(),
        minor: parts.next().unwrap_or_default().to_string(),
        platform: format!("{}/{}", std::env::consts::OS, go_arch(std::env::consts::ARCH)),
        ..BuildInfo::default()
    };
    let mut metrics = Metrics::new(node, build);
    metrics.register_collector(Box::new(dockerlet_http::metrics::ProcessCollector));
    metrics
}

/// Go's name of a CPU architecture (`platform` is `GOOS/GOARCH` in kubernetes_build_info).
fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The node's credentials for a configured sandbox image (its Docker config files, as for a
/// pod's pull); none for the built-in image, which is never pulled.
fn sandbox_credentials(image: Option<&str>, root_dir: &std::path::Path) -> Vec<dockerlet_runtime::RegistryAuth> {
    let Some(image) = image else { return Vec::new() };
    match dockerlet_host::docker_config::node_keyring(&dockerlet_host::docker_config::candidates(root_dir)) {
        Ok(Some((_, keyring))) => keyring.lookup(image),
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "the node's Docker config is not used");
            Vec::new()
        }
    }
}

async fn connect(endpoint: &str) -> anyhow::Result<DockerRuntime> {
    let deadline = tokio::time::Instant::now() + RUNTIME_WAIT;
    loop {
        let attempt = async {
            let runtime = DockerRuntime::connect(endpoint).await?;
            runtime.ping().await?;
            Ok::<_, dockerlet_runtime::RuntimeError>(runtime)
        };
        match attempt.await {
            Ok(runtime) => return Ok(runtime),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(endpoint, error = %e, "Docker engine not reachable yet; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("--container-runtime-endpoint {endpoint}: Docker engine not reachable"))
            }
        }
    }
}

/// The first IPv4 address of a physical-looking interface; loopback as a last resort.
fn detect_node_ip() -> IpAddr {
    let skip = ["docker", "br-", "veth", "lo", "virbr", "cni", "flannel"];
    if_addrs::get_if_addrs()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| !i.is_loopback() && i.ip().is_ipv4() && !skip.iter().any(|p| i.name.starts_with(p)))
        .map(|i| i.ip())
        .next()
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// Set the agent's own OOM score adjustment to kubelet's -999. If the host refuses (no
/// CAP_SYS_RESOURCE, as inside some containers), containers cannot get negative values either:
/// return the lowest value allowed, which then clamps theirs.
fn protect_from_oom_killer() -> i64 {
    const KUBELET_OOM_SCORE_ADJ: i64 = -999;
    let path = "/proc/self/oom_score_adj";
    if std::fs::write(path, KUBELET_OOM_SCORE_ADJ.to_string()).is_ok() {
        return KUBELET_OOM_SCORE_ADJ;
    }
    let current = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    tracing::warn!(
        min_oom_score_adj = current,
        "this host does not allow negative OOM score adjustments; container values are clamped"
    );
    current
}

/// The cgroup driver: `--cgroup-driver` if given (refused with kubelet's message when the
/// engine uses another), else the engine's, as kubelet ≥ 1.31 takes the runtime's
/// (`KubeletCgroupDriverFromCRI`); an engine that names none (or an unknown one) means
/// cgroupfs, kubelet's default.
fn cgroup_driver(ours: Option<CgroupDriver>, docker: &str) -> anyhow::Result<CgroupDriver> {
    let engine = CgroupDriver::parse(docker);
    match (ours, engine) {
        (Some(ours), Some(engine)) if ours != engine => anyhow::bail!(
            "misconfiguration: kubelet cgroup driver: {:?} is different from docker cgroup driver: {:?}",
            ours.name(),
            engine.name()
        ),
        (Some(ours), _) => Ok(ours),
        (None, Some(engine)) => {
            tracing::info!(
                cgroup_driver = engine.name(),
                "using the container runtime's cgroup driver"
            );
            Ok(engine)
        }
        (None, None) => Ok(CgroupDriver::Cgroupfs),
    }
}

/// `--kubelet-cgroups` and `--system-cgroups` set up as kubelet's container manager does at
/// start: the agent moved into its cgroup, the root cgroup's other processes (but PID 1 and
/// kernel threads) into the system cgroup; a failure stops the start. The SystemCgroupsActor
/// then keeps them every minute. None when neither is given.
async fn system_cgroups(config: &AgentConfig) -> anyhow::Result<Option<SystemCgroupsConfig>> {
    let (kubelet, system) = (
        config.cgroups.kubelet_cgroups.clone(),
        config.cgroups.system_cgroups.clone(),
    );
    if kubelet.is_none() && system.is_none() {
        return Ok(None);
    }
    let layout = dockerlet_host::cgroup::CgroupLayout::detect().context("--kubelet-cgroups, --system-cgroups")?;
    let system_cgroups = SystemCgroupsConfig {
        layout,
        kubelet,
        system,
        period: dockerlet_actors::system_cgroups::PERIOD,
    };
    let set_up = system_cgroups.clone();
    let moved = tokio::task::spawn_blocking(move || dockerlet_actors::system_cgroups::ensure(&set_up))
        .await
        .context("setting up the system cgroups")?
        .context("setting up the system cgroups (--kubelet-cgroups, --system-cgroups)")?;
    tracing::info!(
        kubelet_cgroups = ?system_cgroups.kubelet,
        system_cgroups = ?system_cgroups.system,
        moved,
        "system cgroups set up"
    );
    Ok(Some(system_cgroups))
}

/// The pod cgroup tree, as kubelet's container manager sets it up at start: the driver checked
/// against Docker's, `kubepods` (limited to the node's allocatable CPU, memory and PIDs with
/// `--enforce-node-allocatable=pods`, else its capacity), its QoS cgroups, the pod cgroups of
/// pods with no container left on this node removed, and the limits of the enforced reserved
/// cgroups. None with `--cgroups-per-qos=false`.
async fn pod_cgroups(
    config: &AgentConfig,
    driver: CgroupDriver,
    runtime: &DockerRuntime,
) -> anyhow::Result<(CgroupNaming, Option<Arc<PodCgroups>>)> {
    let naming = CgroupNaming::new(&config.cgroups.root, config.cgroups.per_qos, driver)?;
    if !config.cgroups.per_qos {
        return Ok((naming, None));
    }
    let layout = dockerlet_host::cgroup::CgroupLayout::detect().context("--cgroups-per-qos")?;
    let slices: Option<Arc<dyn SliceManager>> = match driver {
        CgroupDriver::Cgroupfs => None,
        CgroupDriver::Systemd => Some(Arc::new(
            tokio::task::spawn_blocking(SystemdSlices::connect)
                .await
                .context("connecting to systemd")?
                .context("--cgroup-driver systemd")?,
        )),
    };
    let tree = Arc::new(
        PodCgroups::new(
            layout.clone(),
            naming.clone(),
            config.cgroups.pod_pids_limit,
            slices.clone(),
        )
        .with_cpu_cfs_quota(config.node.cpu_cfs_quota),
    );
    let cpu_milli = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64 * 1000;
    let kubepods = crate::node_setup::kubepods_limits(config, cpu_milli, node_memory_bytes());
    let keep: BTreeSet<String> = runtime
        .list_node_containers(&config.node_name)
        .await
        .context("listing the node's containers")?
        .into_iter()
        .map(|c| c.pod_uid.0)
        .collect();
    let set_up = tree.clone();
    let (removed, errors) = tokio::task::spawn_blocking(move || {
        set_up.setup(&kubepods)?;
        Ok::<_, dockerlet_host::cgroup::tree::CgroupTreeError>(set_up.remove_orphans(&keep))
    })
    .await
    .context("setting up the pod cgroups")?
    .with_context(|| format!("--cgroup-root {}: setting up the kubepods cgroups", naming.root()))?;
    for uid in removed {
        tracing::info!(pod.uid = %uid, "removed the cgroup of a pod no longer on this node");
    }
    for error in errors {
        tracing::warn!(error = %error, "could not remove an orphaned pod cgroup");
    }
    let reserved_config = config.clone();
    tokio::task::spawn_blocking(move || {
        crate::node_setup::enforce_reserved(&reserved_config, &layout, slices.as_deref())
    })
    .await
    .context("enforcing the reserved cgroups")??;
    Ok((naming, Some(tree)))
}

fn node_memory_bytes() -> i64 {
    dockerlet_host::meminfo::MemInfo::read().total()
}

/// The container log links (kubelet's `/var/log/pods` and `/var/log/containers`), when Docker
/// writes json-file logs under its root; otherwise none, said once.
async fn log_links(
    runtime: &DockerRuntime,
    pods_dir: &std::path::Path,
    docker_root: Option<&std::path::Path>,
) -> Option<dockerlet_host::pod_logs::LogLinks> {
    let driver = match runtime.logging_driver().await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read Docker's log driver: no container log files under --pod-logs-dir");
            return None;
        }
    };
    if driver != "json-file" {
        tracing::warn!(driver = %driver, "Docker's log driver is not json-file: no container log files under --pod-logs-dir (kubectl logs works through Docker)");
        return None;
    }
    let Some(docker_root) = docker_root else {
        tracing::warn!("Docker's root directory is not visible here: no container log files under --pod-logs-dir");
        return None;
    };
    Some(dockerlet_host::pod_logs::LogLinks {
        pods_dir: pods_dir.to_path_buf(),
        containers_dir: std::path::PathBuf::from(dockerlet_host::pod_logs::CONTAINERS_DIR),
        docker_root: docker_root.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker's default log driver must write files (json-file, local): another is refused
    /// naming it.
    #[test]
    fn only_file_log_drivers_are_accepted() {
        assert_eq!(file_log_driver("json-file").unwrap(), FileLogDriver::JsonFile);
        assert_eq!(file_log_driver("local").unwrap(), FileLogDriver::Local);
        let e = file_log_driver("journald").unwrap_err().to_string();
        assert!(
            e.starts_with("Docker's default log driver \"journald\" is not file-based: dockerlet needs \"json-file\" or \"local\""),
            "{e}"
        );
        assert!(file_log_driver("none").is_err());
    }

    /// A driver other than Docker's is refused with kubelet's message; none given takes the
    /// engine's; an engine that names none means cgroupfs.
    #[test]
    fn cgroup_driver_is_checked_against_dockers() {
        let e = cgroup_driver(Some(CgroupDriver::Cgroupfs), "systemd")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "misconfiguration: kubelet cgroup driver: \"cgroupfs\" is different from docker cgroup driver: \"systemd\""
        );
        assert_eq!(
            cgroup_driver(Some(CgroupDriver::Systemd), "systemd").unwrap(),
            CgroupDriver::Systemd
        );
        assert_eq!(cgroup_driver(None, "systemd").unwrap(), CgroupDriver::Systemd);
        assert_eq!(cgroup_driver(None, "cgroupfs").unwrap(), CgroupDriver::Cgroupfs);
        assert_eq!(cgroup_driver(None, "").unwrap(), CgroupDriver::Cgroupfs);
        assert_eq!(
            cgroup_driver(Some(CgroupDriver::Systemd), "").unwrap(),
            CgroupDriver::Systemd
        );
    }
}
