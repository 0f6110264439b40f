//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource`).

/// Parse a Kubernetes quantity (`128Mi`, `1G`, `0.5`, `250m`, `1e3`); `milli` returns
/// thousandths (for CPU), otherwise whole units rounded up (for bytes).
pub fn parse_quantity(text: &str, milli: bool) -> Option<i64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let multiplier: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    let scaled = value * multiplier * if milli { 1000.0 } else { 1.0 };
    (scaled.is_finite() && scaled >= 0.0 && scaled < i64::MAX as f64).then(|| scaled.ceil() as i64)
}
