//! `test-apiserver`: the in-memory Kubernetes API server fixture on its own, to try dockerlet's
//! API-server mode by hand without a cluster. Serves until killed.
//!
//! ```sh
//! cargo run --release -p dockerlet-fake-apiserver --bin test-apiserver -- \
//!     --listen 127.0.0.1:6443 --kubeconfig-out .run/kubeconfig
//! kubectl --kubeconfig .run/kubeconfig get nodes
//! dockerlet --kubeconfig .run/kubeconfig ...
//! ```

use clap::Parser;
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig, DEFAULT_HISTORY};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// An in-memory Kubernetes API server for testing (plain HTTP or HTTPS, bearer token).
#[derive(Parser, Debug)]
#[command(name = "test-apiserver", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write a kubeconfig for kubectl and `dockerlet --kubeconfig`.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Bearer token clients must send (random if not given).
    #[arg(long)]
    token: Option<String>,
    /// Changes kept for watches that resume from a resourceVersion.
    #[arg(long, default_value_t = DEFAULT_HISTORY)]
    history: usize,
    /// Seconds between bookmarks on watches that allow them.
    #[arg(long, default_value_t = 10)]
    bookmark_interval: u64,
    /// Print one line per request (method, path, status) to stderr.
    #[arg(long)]
    log_requests: bool,
    /// Serve HTTPS (a CA made up at start; the kubeconfig carries it).
    #[arg(long)]
    tls: bool,
    /// Do not run the ServiceAccount admission plugin (no default service account, no
    /// kube-api-access volume on new pods).
    #[arg(long)]
    no_service_account_admission: bool,
    /// Do not bind pods created without `spec.nodeName` to a node (no scheduler).
    #[arg(long)]
    no_scheduler: bool,
    /// Authorize nodes as `--authorization-mode=Node,RBAC` with NodeRestriction.
    #[arg(long)]
    node_authorization: bool,
    /// Write a kubeconfig with a node credential (`system:node:<NAME>`) for this node beside
    /// the kubeconfig, as `<kubeconfig>-node-<NAME>` (repeatable).
    #[arg(long = "node-kubeconfig", value_name = "NAME")]
    node_kubeconfigs: Vec<String>,
    /// Allocate each Node a pod CIDR from this range (kube-controller-manager's
    /// `--allocate-node-cidrs --cluster-cidr`), a /24 each.
    #[arg(long, value_name = "CIDR")]
    cluster_cidr: Option<String>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let config = ApiServerConfig {
        listen: args.listen,
        history: args.history,
        bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
        token: args.token,
        log_requests: args.log_requests || std::env::var_os("TEST_APISERVER_LOG").is_some(),
        tls: args.tls,
        service_account_admission: !args.no_service_account_admission,
        scheduler: !args.no_scheduler,
        node_authorization: args.node_authorization,
        cluster_cidr: args.cluster_cidr,
        ..ApiServerConfig::default()
    };
    let server = match ApiServer::start_with(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("test-apiserver: cannot start on {}: {e}", args.listen);
            return std::process::ExitCode::from(1);
        }
    };
    let kubeconfig = args
        .kubeconfig_out
        .unwrap_or_else(|| server.kubeconfig_path().to_path_buf());
    if let Err(e) = server.write_kubeconfig(&kubeconfig) {
        eprintln!("test-apiserver: cannot write {}: {e}", kubeconfig.display());
        return std::process::ExitCode::from(1);
    }
    // The CA of the certificate it proxies kubelet API calls with, beside the kubeconfig, for
    // the agent's --client-ca-file (kubectl logs, exec, attach, port-forward).
    let client_ca = kubeconfig.with_file_name("kubelet-client-ca.crt");
    if let Err(e) = std::fs::copy(server.kubelet_client_ca_path(), &client_ca) {
        eprintln!("test-apiserver: cannot write {}: {e}", client_ca.display());
        return std::process::ExitCode::from(1);
    }
    println!("test-apiserver: serving {} (in memory; Ctrl-C to stop)", server.url());
    println!("  kubeconfig: {}", kubeconfig.display());
    println!("  kubectl --kubeconfig {} get nodes", kubeconfig.display());
    println!(
        "  a node: dockerlet --kubeconfig {} --client-ca-file {} --hostname-override node-a",
        kubeconfig.display(),
        client_ca.display()
    );
    for node in &args.node_kubeconfigs {
        let written = server.node_kubeconfig(node).and_then(|path| {
            let out = kubeconfig.with_file_name(format!(
                "{}-node-{node}",
                kubeconfig.file_name().unwrap_or_default().to_string_lossy()
            ));
            std::fs::copy(path, &out).map(|_| out)
        });
        match written {
            Ok(path) => println!(
                "  node {node}: dockerlet --kubeconfig {} --hostname-override {node}",
                path.display()
            ),
            Err(e) => eprintln!("test-apiserver: cannot write node {node}'s kubeconfig: {e}"),
        }
    }
    if args.tls {
        match server.client_certificate_kubeconfig() {
            Ok(path) => println!("  with a client certificate instead of the token: {}", path.display()),
            Err(e) => eprintln!("test-apiserver: cannot write the client certificate kubeconfig: {e}"),
        }
    }
    server.wait();
    std::process::ExitCode::SUCCESS
}
