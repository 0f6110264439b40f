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
}
