//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource`).

/// Parse a Kubernetes quantity (`128Mi`, `1G`, `0.5`, `250m`, `1e3`); `milli` returns
/// thousandths (for CPU), otherwise whole units rounded up (for bytes).
pub fn parse_quantity(text: &str, milli: bool) -> Option<i64> {
    let scaled = quantity_value(text)? * if milli { 1000.0 } else { 1.0 };
    (scaled.is_finite() && scaled >= 0.0 && scaled < i64::MAX as f64).then(|| scaled.ceil() as i64)
}

/// The value of a quantity (`100m` → 0.1, `1Ki` → 1024, `2e3` → 2000), not rounded and of any
/// sign and size: whatever kube-apiserver's grammar `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`
/// and its suffix table accept. `None` if `text` is not a quantity.
pub fn quantity_value(text: &str) -> Option<f64> {
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
    Some(value * multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantities follow kube-apiserver's grammar.
    #[test]
    fn quantities() {
        assert_eq!(quantity_value("100m"), Some(0.1));
        assert_eq!(quantity_value("1Ki"), Some(1024.0));
        assert_eq!(quantity_value("2e3"), Some(2000.0));
        assert_eq!(quantity_value("1.5"), Some(1.5));
        assert_eq!(quantity_value("abc"), None);
        assert_eq!(quantity_value("1 Gi"), None);
        assert_eq!(quantity_value("1GB"), None);
    }

    /// The value keeps what a container's resources cannot use: a sign, fractions of the unit,
    /// sizes beyond `i64`.
    #[test]
    fn values_are_exact_and_unbounded() {
        assert_eq!(quantity_value("-1"), Some(-1.0));
        assert_eq!(parse_quantity("-1", false), None);
        assert_eq!(quantity_value("1.5"), Some(1.5));
        assert_eq!(parse_quantity("1.5", false), Some(2));
        assert_eq!(quantity_value("100E"), Some(1e20));
        assert_eq!(parse_quantity("100E", false), None);
        for bad in ["", "+", ".", "-.", "1.2.3", "++1", "1-", "1e", "1ki"] {
            assert_eq!(quantity_value(bad), None, "{bad:?}");
        }
    }
}
