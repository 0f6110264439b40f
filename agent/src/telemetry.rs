//! Logging: tracing to stderr; `RUST_LOG` or kubelet-style `-v` picks the level.

use tracing_subscriber::EnvFilter;

/// Install the global subscriber.
pub fn init(verbosity: u8) {
    let level = match verbosity {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    };
    // kube and hyper are chatty below warn.
    let default = format!("{level},hyper=warn,hyper_util=warn,actix_server=warn,actix_web=warn");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
