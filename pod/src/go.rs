//! Go's text of values kubelet prints, for messages and documents that must read as kubelet's.

use std::time::Duration;

/// A duration as Go's `time.Duration.String()` writes whole seconds and milliseconds: `20s`,
/// `1m0s`, `1h0m0s`, `500ms`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = ms % 1000;
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        format!("{}.{}s", secs % 60, format!("{frac:03}").trim_end_matches('0'))
    };
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

/// An error and its sources joined with ": ", as Go prints a wrapped error
/// (`fmt.Errorf("…: %w", err)`); a source whose text already ends the chain, as some wrappers
/// repeat it, is not added twice.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations read as Go writes them.
    #[test]
    fn durations_as_go_writes_them() {
        let d = |ms| go_duration(Duration::from_millis(ms));
        assert_eq!(
            [d(0), d(500), d(20_000), d(60_000), d(90_000), d(3_600_000), d(1_500)],
            ["0s", "500ms", "20s", "1m0s", "1m30s", "1h0m0s", "1.5s"]
        );
    }

    /// Each source after a ": ", a source the text already ends with left out.
    #[test]
    fn errors_chain_as_go_wraps_them() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let inner = E("connection refused", None);
        assert_eq!(error_chain(&inner), "connection refused");
        let wrapped = E("dial tcp 10.0.0.1:80", Some(Box::new(E("connection refused", None))));
        assert_eq!(error_chain(&wrapped), "dial tcp 10.0.0.1:80: connection refused");
        let repeating = E("read failed: timed out", Some(Box::new(E("timed out", None))));
        assert_eq!(error_chain(&repeating), "read failed: timed out");
    }
}
