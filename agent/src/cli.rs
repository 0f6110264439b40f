//! Command-line flags, named as kubelet names them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// A duration flag that does not parse (clap prints it after the flag's name).
#[derive(Debug, thiserror::Error)]
#[error("{0} (use a duration like 20s, 1m30s or 500ms)")]
struct DurationFlagError(#[source] humantime::DurationError);

fn duration(s: &str) -> Result<Duration, DurationFlagError> {
    humantime::parse_duration(s).map_err(DurationFlagError)
}

/// dockerlet: a kubelet-compatible node agent that runs pods on Docker.
///
/// Flags override the `--config` file; unset settings take kubelet's defaults.
#[derive(Debug, Default, Parser)]
#[command(name = "dockerlet", version, about, long_about = None)]
pub struct Cli {
    /// KubeletConfiguration-style YAML file (staticPodPath, readOnlyPort, healthzPort, …).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Directory of KubeletConfiguration drop-ins (`*.conf`, in lexical order), merged over
    /// `--config` as kubelet merges them; flags still win.
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// Feature gates, `Name=true,Other=false`, over the config file's `featureGates`; unknown
    /// gates, and values whose behaviour dockerlet lacks, are refused.
    #[arg(long, value_name = "GATES", value_delimiter = ',')]
    pub feature_gates: Vec<String>,

    /// Directory (or file) of static pod manifests to run.
    #[arg(long, value_name = "PATH")]
    pub pod_manifest_path: Option<PathBuf>,

    /// Node name to use instead of the hostname.
    #[arg(long, value_name = "NAME")]
    pub hostname_override: Option<String>,

    /// Directory for the agent's state [default: /var/lib/dockerlet].
    #[arg(long, value_name = "DIR")]
    pub root_dir: Option<PathBuf>,

    /// A file the agent holds an exclusive lock (flock) on while it runs; a second agent given
    /// the same file waits for it, as kubelet's `--lock-file`.
    #[arg(long, value_name = "FILE")]
    pub lock_file: Option<PathBuf>,

    /// Exit when another process opens the `--lock-file` (one waiting for the lock), as
    /// kubelet's `--exit-on-lock-contention`: a new agent takes over from the running one.
    #[arg(long)]
    pub exit_on_lock_contention: bool,

    /// Where container log files go: `<dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log`,
    /// linked from `/var/log/containers` [default: /var/log/pods].
    #[arg(long, value_name = "DIR")]
    pub pod_logs_dir: Option<PathBuf>,

    /// Size at which Docker rotates a container's log file (`containerLogMaxSize`), a quantity
    /// like 10Mi; negative: no rotation (the daemon's log options apply) [default: 10Mi].
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub container_log_max_size: Option<String>,

    /// Log files Docker keeps per container, the current one included
    /// (`containerLogMaxFiles`); at least 2 [default: 5].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub container_log_max_files: Option<i64>,

    /// Port of the read-only API (`/pods`); 0 disables it [default: 10255].
    #[arg(long, value_name = "PORT")]
    pub read_only_port: Option<u16>,

    /// Port of the healthz server; 0 disables it [default: 10248].
    #[arg(long, value_name = "PORT")]
    pub healthz_port: Option<u16>,

    /// Address of the healthz server [default: 127.0.0.1].
    #[arg(long, value_name = "IP")]
    pub healthz_bind_address: Option<IpAddr>,

    /// Address the read-only API listens on [default: 0.0.0.0].
    #[arg(long, value_name = "IP")]
    pub address: Option<IpAddr>,

    /// How often the manifest path is re-listed [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub file_check_frequency: Option<Duration>,

    /// How often container and node statistics are collected (`/stats/summary`) [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub housekeeping_interval: Option<Duration>,

    /// Longest time between two syncs of a pod with nothing happening [default: 1m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub sync_frequency: Option<Duration>,

    /// Sandbox (pause) image; by default the agent provisions its own built-in image.
    #[arg(long, value_name = "IMAGE")]
    pub pod_infra_container_image: Option<String>,

    /// The Docker engine's endpoint [default: unix:///var/run/docker.sock].
    #[arg(long, value_name = "URL")]
    pub container_runtime_endpoint: Option<String>,

    /// Address of the debug endpoint (`/debug/actors`, `/debug`) [default: 127.0.0.1:10265].
    #[arg(long, value_name = "HOST:PORT")]
    pub debug_address: Option<SocketAddr>,

    /// First CrashLoopBackOff delay [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub crash_loop_backoff_initial: Option<Duration>,

    /// Longest CrashLoopBackOff delay, 1s–300s [default: 300s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub crash_loop_backoff_max: Option<Duration>,

    /// The node's IP (`status.hostIP`); detected when unset.
    #[arg(long, value_name = "IP")]
    pub node_ip: Option<IpAddr>,

    /// Log verbosity as kubelet's `-v`: 0–2 info, 3–4 debug, 5+ trace. `RUST_LOG` wins.
    #[arg(short = 'v', long = "v", value_name = "LEVEL")]
    pub verbosity: Option<u8>,

    /// URL to poll for static pods (one Pod or a PodList, JSON or YAML).
    #[arg(long, value_name = "URL")]
    pub manifest_url: Option<String>,

    /// Headers for `--manifest-url` requests, `Name:value` (repeat or comma-separate).
    #[arg(long, value_name = "HEADER", value_delimiter = ',')]
    pub manifest_url_header: Vec<String>,

    /// How often `--manifest-url` is polled [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub http_check_frequency: Option<Duration>,

    /// kubeconfig of the API server to join; without it the agent runs standalone.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// TLS bootstrap: a kubeconfig (a bootstrap token, say) to ask the API server for the node's
    /// client certificate with when `--kubeconfig` does not exist or its certificate has
    /// expired; the certificate is kept in `--cert-dir` and `--kubeconfig` is written to use it.
    #[arg(long, value_name = "FILE", requires = "kubeconfig")]
    pub bootstrap_kubeconfig: Option<PathBuf>,

    /// Renew the node's client certificate through the API server (certificates.k8s.io) at
    /// 70–90 % of its lifetime (`rotateCertificates`) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub rotate_certificates: Option<bool>,

    /// Join the cluster this agent runs in as a pod, with its service account (in-cluster
    /// config: `KUBERNETES_SERVICE_HOST`/`_PORT` and the service account's token and CA).
    #[arg(long, conflicts_with = "kubeconfig")]
    pub in_cluster: bool,

    /// Where the service account's `token` and `ca.crt` are for `--in-cluster`.
    #[arg(
        long,
        value_name = "DIR",
        hide = true,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount"
    )]
    pub service_account_dir: PathBuf,

    /// API requests per second (kubeAPIQPS) [default: 50].
    #[arg(long, value_name = "QPS")]
    pub kube_api_qps: Option<f64>,

    /// API request burst (kubeAPIBurst) [default: 100].
    #[arg(long, value_name = "N")]
    pub kube_api_burst: Option<u32>,

    /// Pod events written to the API per second (eventRecordQPS); 0 uses client-go's default
    /// of 5 [default: 50].
    #[arg(long, value_name = "QPS", allow_negative_numbers = true)]
    pub event_qps: Option<i32>,

    /// Pod events written at once (eventBurst); 0 uses client-go's default of 10 [default: 100].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub event_burst: Option<i32>,

    /// Register the Node with the API server [default: true].
    #[arg(long, value_name = "BOOL")]
    pub register_node: Option<bool>,

    /// Labels added to the Node at registration (`key=value,key2=value2`).
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    pub node_labels: Vec<String>,

    /// How often node status is written and the lease renewed [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub node_status_update_frequency: Option<Duration>,

    /// Lease duration of the node's Lease [default: 40].
    #[arg(long, value_name = "SECONDS")]
    pub node_lease_duration_seconds: Option<i32>,

    /// Most images the Node's `status.images` names, largest first (`nodeStatusMaxImages`); -1
    /// for all [default: 50].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub node_status_max_images: Option<i64>,

    /// Port of the kubelet API (HTTPS, authenticated), advertised in the Node's daemon
    /// endpoints; 0 disables it [default: 10250].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// The kubelet API's serving certificate (PEM); without it a self-signed one is kept in
    /// `--cert-dir`.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// The key of `--tls-cert-file` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Where the self-signed `kubelet.crt`/`kubelet.key` and the client certificates of
    /// `--bootstrap-kubeconfig` and `--rotate-certificates` are kept [default: <root-dir>/pki].
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,

    /// Lowest TLS version of the kubelet API: VersionTLS12 or VersionTLS13 [default: VersionTLS12].
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,

    /// TLS 1.2 cipher suites of the kubelet API, Go's names, comma-separated [default: rustls'].
    #[arg(long, value_name = "SUITES", value_delimiter = ',')]
    pub tls_cipher_suites: Vec<String>,

    /// Client certificates signed by this CA (PEM) authenticate to the kubelet API: CN the user,
    /// O the groups.
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,

    /// Requests to the kubelet API without credentials are `system:anonymous` (else 401)
    /// [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub anonymous_auth: Option<bool>,

    /// Bearer tokens to the kubelet API are checked by a TokenReview to the API server
    /// [default: true with an API server (--kubeconfig), false without; true without one is
    /// refused].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub authentication_token_webhook: Option<bool>,

    /// How long TokenReview verdicts are kept [default: 2m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub authentication_token_webhook_cache_ttl: Option<Duration>,

    /// Authorization of the kubelet API: Webhook (SubjectAccessReview to the API server) or
    /// AlwaysAllow [default: Webhook with an API server; without one every request is
    /// forbidden (403) unless AlwaysAllow is given].
    #[arg(long, value_name = "MODE")]
    pub authorization_mode: Option<String>,

    /// How long allowed SubjectAccessReview verdicts are kept [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub authorization_webhook_cache_authorized_ttl: Option<Duration>,

    /// How long denied SubjectAccessReview verdicts are kept [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Option<Duration>,

    /// Exec, attach and port-forward connections on which nothing has moved for this long are
    /// closed; 0 for no limit [default: 4h].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub streaming_connection_idle_timeout: Option<Duration>,

    /// Taints the Node is registered with: `key=value:Effect` or `key:Effect`, comma-separated.
    #[arg(long, value_name = "TAINTS", value_delimiter = ',')]
    pub register_with_taints: Vec<String>,

    /// Resources reserved for Kubernetes daemons, taken off allocatable (`cpu=200m,memory=512Mi`).
    #[arg(long, value_name = "RESOURCES", value_delimiter = ',')]
    pub kube_reserved: Vec<String>,

    /// Resources reserved for the system, taken off allocatable (`cpu=200m,memory=512Mi`).
    #[arg(long, value_name = "RESOURCES", value_delimiter = ',')]
    pub system_reserved: Vec<String>,

    /// Hard eviction thresholds (`memory.available<100Mi,nodefs.available<10%`); they drive the
    /// pressure conditions and come off allocatable [default: kubelet's].
    #[arg(long, value_name = "THRESHOLDS", value_delimiter = ',')]
    pub eviction_hard: Vec<String>,

    /// Soft eviction thresholds (`memory.available<1.5Gi`): a pod is evicted once one has been
    /// met for its grace period (`--eviction-soft-grace-period`, which each needs).
    #[arg(long, value_name = "THRESHOLDS", value_delimiter = ',')]
    pub eviction_soft: Vec<String>,

    /// Grace periods of the soft thresholds (`memory.available=1m30s`).
    #[arg(long, value_name = "PERIODS", value_delimiter = ',')]
    pub eviction_soft_grace_period: Vec<String>,

    /// The longest grace period (seconds) a soft eviction gives a pod; 0: the pod's own
    /// [default: 0].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub eviction_max_pod_grace_period: Option<i32>,

    /// How far above its threshold a signal must get back before the pressure ends
    /// (`memory.available=0Mi,nodefs.available=500Mi`).
    #[arg(long, value_name = "AMOUNTS", value_delimiter = ',')]
    pub eviction_minimum_reclaim: Vec<String>,

    /// How long a pressure condition stays True after its threshold was last met [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub eviction_pressure_transition_period: Option<Duration>,

    /// Container GC: a dead container younger than this (since its creation) is kept
    /// [default: 0]. Deprecated in kubelet (as the two below), still honoured there and here.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub minimum_container_ttl_duration: Option<Duration>,

    /// Container GC: dead instances kept per container of a pod; negative: no limit
    /// [default: 1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub maximum_dead_containers_per_container: Option<i32>,

    /// Container GC: dead containers kept on the node; negative: no limit [default: -1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub maximum_dead_containers: Option<i32>,

    /// How often container GC runs (tests only: kubelet's period is a fixed minute).
    #[arg(long, value_name = "DURATION", value_parser = duration, hide = true, default_value = "1m")]
    pub container_gc_period: Duration,

    /// DNS server IPs of the cluster (`clusterDNS`, comma-separated), the only nameservers of
    /// ClusterFirst pods; without them such pods fall back to Default (MissingClusterDNS event).
    #[arg(long, value_name = "IPS", value_delimiter = ',')]
    pub cluster_dns: Vec<String>,

    /// The cluster's DNS domain (`clusterDomain`, e.g. `cluster.local`): pods' search path and
    /// FQDNs.
    #[arg(long, value_name = "DOMAIN")]
    pub cluster_domain: Option<String>,

    /// The resolver configuration pods' DNS starts from (`resolvConf`); "" for none
    /// [default: /etc/resolv.conf].
    #[arg(long, value_name = "FILE")]
    pub resolv_conf: Option<String>,

    /// Serve the kubelet API on `--port` (`enableServer`) [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub enable_server: Option<bool>,

    /// Serve exec, attach, run, port-forward, container logs, running pods and `/configz`
    /// (`enableDebuggingHandlers`); false answers them 405 as kubelet [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub enable_debugging_handlers: Option<bool>,

    /// Use the runtime's default seccomp profile for containers that set none (instead of
    /// Unconfined) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub seccomp_default: Option<bool>,

    /// Unsafe sysctls or patterns ending in `*` pods may set beyond the safe set
    /// (`kernel.msg*,net.core.somaxconn`).
    #[arg(long, value_name = "SYSCTLS", value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,

    /// The cgroup the pod tree (`kubepods`) is made under; "" is `/` [default: /].
    #[arg(long, value_name = "CGROUP")]
    pub cgroup_root: Option<String>,

    /// Make the QoS and pod cgroups (`kubepods/…/pod<uid>`) and put every pod's containers
    /// there; false leaves them in Docker's default parent (or `--cgroup-root`) [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub cgroups_per_qos: Option<bool>,

    /// The cgroup driver: `cgroupfs` (`systemd` is refused: not implemented); it must be the
    /// Docker engine's [default: cgroupfs].
    #[arg(long, value_name = "DRIVER")]
    pub cgroup_driver: Option<String>,

    /// The cgroup the agent puts itself in at start and every minute (`/kubelet`); its stats
    /// are the `kubelet` system container [default: where it was started].
    #[arg(long, value_name = "CGROUP")]
    pub kubelet_cgroups: Option<String>,

    /// The container engine's cgroup, whose stats are the `runtime` system container; the
    /// engine is not moved [default: the cgroups of dockerd and containerd, as found].
    #[arg(long, value_name = "CGROUP")]
    pub runtime_cgroups: Option<String>,

    /// The cgroup every non-kernel process left in the root cgroup (but PID 1) is moved to, at
    /// start and every minute; its stats are the `misc` system container. Needs an explicit
    /// --cgroup-root [default: none].
    #[arg(long, value_name = "CGROUP")]
    pub system_cgroups: Option<String>,

    /// Most processes a pod may run (its cgroup's pids.max); -1 for no limit [default: -1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub pod_max_pids: Option<i64>,

    /// Pull images one at a time; false lets several pulls run at once (up to
    /// `--max-parallel-image-pulls`) [default: true, or false when --max-parallel-image-pulls
    /// is 2 or more].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub serialize_image_pulls: Option<bool>,

    /// Most image pulls at once when they are not serialized (`maxParallelImagePulls`)
    /// [default: no limit].
    #[arg(long, value_name = "N")]
    pub max_parallel_image_pulls: Option<i64>,

    /// Image filesystem usage (percent) at or above which image garbage collection runs
    /// (`imageGCHighThresholdPercent`); 100 with no `imageMaximumGCAge` turns image GC off
    /// [default: 85].
    #[arg(long, value_name = "PERCENT", allow_negative_numbers = true)]
    pub image_gc_high_threshold: Option<i64>,

    /// Image filesystem usage (percent) image garbage collection frees down to
    /// (`imageGCLowThresholdPercent`) [default: 80].
    #[arg(long, value_name = "PERCENT", allow_negative_numbers = true)]
    pub image_gc_low_threshold: Option<i64>,

    /// How long after it is first seen an unused image may be garbage-collected
    /// (`imageMinimumGCAge`) [default: 2m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub minimum_image_ttl_duration: Option<Duration>,

    /// How often image garbage collection runs — a dockerlet extension (kubelet's period is a
    /// constant 5m), for tests [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub image_gc_period: Option<Duration>,

    /// The pod network: `cni` attaches every sandbox not on the host network with the CNI
    /// plugins of `--cni-conf-dir`; empty uses Docker's bridge network. Not given: `cni` when
    /// `--cni-conf-dir` holds a usable configuration at start, else Docker's bridge.
    #[arg(long, value_name = "NAME")]
    pub network_plugin: Option<String>,

    /// The directory of CNI network configurations; the first in lexical order that loads is
    /// used [default: /etc/cni/net.d].
    #[arg(long, value_name = "DIR")]
    pub cni_conf_dir: Option<PathBuf>,

    /// Directories searched for CNI plugin binaries, comma-separated [default: /opt/cni/bin].
    #[arg(long, value_name = "DIRS", value_delimiter = ',')]
    pub cni_bin_dir: Vec<PathBuf>,

    /// The CNI cache directory (libcni's: each attachment's result, for DEL after a restart)
    /// [default: /var/lib/cni/cache].
    #[arg(long, value_name = "DIR")]
    pub cni_cache_dir: Option<PathBuf>,

    /// This node's pod CIDR (`podCIDR`), for `--cni-conf-template`; in a cluster the Node's
    /// `spec.podCIDR`, as the controller manager allocates it, replaces it [default: none].
    #[arg(long, value_name = "CIDR")]
    pub pod_cidr: Option<String>,

    /// A CNI configuration template: once the node's pod CIDR is known (`--pod-cidr`, the
    /// Node's `spec.podCIDR`), `{{.PodCIDR}}` in it is replaced and the result written as
    /// `<cni-conf-dir>/10-dockerlet.conflist` — a dockerlet extension after containerd's CRI
    /// `conf_template` [default: none].
    #[arg(long, value_name = "FILE")]
    pub cni_conf_template: Option<PathBuf>,

    /// The longest one CNI plugin call may run before it is killed and the sandbox fails — a
    /// dockerlet extension (kubelet bounds the whole sandbox creation by
    /// `runtimeRequestTimeout`, 2m) [default: 2m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub cni_plugin_timeout: Option<Duration>,

    /// How long a node shutdown waits for pods to stop (`shutdownGracePeriod`): a logind delay
    /// inhibitor holds the shutdown meanwhile; 0 shuts down at once [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub shutdown_grace_period: Option<Duration>,

    /// The part of `--shutdown-grace-period` kept for critical pods, stopped last
    /// (`shutdownGracePeriodCriticalPods`) [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub shutdown_grace_period_critical_pods: Option<Duration>,

    /// Most pods this node runs (`maxPods`); admission refuses more (OutOfpods) [default: 110].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_pods: Option<i64>,

    /// Most pods per CPU core (`podsPerCore`): the pod capacity is the smaller of this times
    /// the cores and --max-pods; 0 for no per-core limit [default: 0].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub pods_per_core: Option<i64>,

    /// Refuse to start when swap is on (`failSwapOn`) [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub fail_swap_on: Option<bool>,

    /// Refuse to start when kubelet's kernel tunables differ, instead of setting them
    /// (`protectKernelDefaults`) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub protect_kernel_defaults: Option<bool>,

    /// Enforce CPU limits as CFS quotas (`cpuCFSQuota`); false leaves containers and pod
    /// cgroups only their CPU shares [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub cpu_cfs_quota: Option<bool>,

    /// The CFS quota period (`cpuCFSQuotaPeriod`); only 100ms is accepted (another needs the
    /// CustomCPUCFSQuotaPeriod feature gate) [default: 100ms].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub cpu_cfs_quota_period: Option<Duration>,

    /// What node allocatable enforces (`enforceNodeAllocatable`): pods, kube-reserved,
    /// system-reserved (or their -compressible forms), or none [default: pods].
    #[arg(long, value_name = "LEVELS", value_delimiter = ',')]
    pub enforce_node_allocatable: Option<Vec<String>>,

    /// The existing cgroup `--kube-reserved` is enforced on (`kubeReservedCgroup`).
    #[arg(long, value_name = "CGROUP")]
    pub kube_reserved_cgroup: Option<String>,

    /// The existing cgroup `--system-reserved` is enforced on (`systemReservedCgroup`).
    #[arg(long, value_name = "CGROUP")]
    pub system_reserved_cgroup: Option<String>,

    /// The sysctl tree the kernel tunables are checked and set in (tests only: kubelet has no
    /// such flag).
    #[arg(long, value_name = "DIR", hide = true, default_value = "/proc/sys")]
    pub proc_sys_root: PathBuf,

    /// The swaps file swap is read from (tests only: kubelet has no such flag).
    #[arg(long, value_name = "FILE", hide = true, default_value = "/proc/swaps")]
    pub proc_swaps: PathBuf,

    /// Let `POST /debug/fault` make actors panic (tests only).
    #[arg(long, hide = true)]
    pub enable_fault_injection: bool,

    /// The kernel log the OOM watcher reads (tests only: kubelet has no such flag; a regular
    /// file or FIFO of `/dev/kmsg` records is tailed).
    #[arg(long, value_name = "PATH", hide = true, default_value = "/dev/kmsg")]
    pub kmsg_path: PathBuf,
}
