//! Logging: tracing to stderr; `RUST_LOG` or kubelet-style `-v` picks the level. Colours only
//! on a terminal: a log file or the journal gets plain text, as kubelet's (and `NO_COLOR`
//! turns them off on a terminal too).

use std::io::IsTerminal;
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
        .with_ansi(colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR")))
        .init();
}

/// Whether to colour the log: on a terminal, unless `NO_COLOR` is set to anything non-empty
/// (no-color.org).
fn colours(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colours;

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".into())));
        assert!(!colours(true, Some("1".into())));
        assert!(!colours(false, None));
    }
}
