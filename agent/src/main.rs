//! `dockerlet`: a kubelet-compatible node agent that runs pods on Docker.
//!
//! # Layout
//! - [`cli`]: kubelet-named flags.
//! - [`config`]: the `--config` file merged under the flags and validated.
//! - [`wiring`]: starts Docker, the actors and the HTTP servers, in that order.
//! - [`node`]: the Node object registered in API-server mode.
//! - [`node_setup`]: swap, kernel tunables, `kubepods` and reserved-cgroup limits at start.
//! - [`telemetry`]: logging setup.

mod cli;
mod config;
mod configz;
mod memory;
mod node;
mod node_claim;
mod node_lock;
mod node_setup;
mod port_forward;
mod reviews;
mod telemetry;
mod wiring;

use std::process::ExitCode;

use clap::Parser;

fn hostname() -> String {
    rustix::system::uname().nodename().to_string_lossy().into_owned()
}

fn main() -> ExitCode {
    memory::limit_arenas();
    let cli = cli::Cli::parse();
    telemetry::init(cli.verbosity.unwrap_or(0));
    match dockerlet_host::process::raise_open_files_limit() {
        Ok(l) if l.was != l.now => {
            tracing::info!(was = l.was, now = l.now, "open files limit raised to the hard limit")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
    }
    let config = match config::build(&cli, hostname) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let system = actix::System::with_tokio_rt(memory::runtime);
    match system.block_on(wiring::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            // Exit now: dropping a System whose actors never ran would start them without a runtime.
            std::process::exit(1)
        }
    }
}
