//! Percentiles and medians of samples, in seconds.

use std::time::Duration;

/// A set of latency samples.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    sorted: Vec<f64>,
}

impl Samples {
    /// Samples in seconds, any order.
    pub fn new(mut secs: Vec<f64>) -> Self {
        secs.retain(|s| s.is_finite());
        secs.sort_by(f64::total_cmp);
        Samples { sorted: secs }
    }

    /// Samples from durations.
    pub fn from_durations(d: &[Duration]) -> Self {
        Self::new(d.iter().map(Duration::as_secs_f64).collect())
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Nearest-rank percentile `p` (0–100); `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.sorted.is_empty() {
            return None;
        }
        let rank = ((p / 100.0) * self.sorted.len() as f64).ceil() as usize;
        Some(self.sorted[rank.clamp(1, self.sorted.len()) - 1])
    }

    /// The median (mean of the middle two for an even count).
    pub fn median(&self) -> Option<f64> {
        let n = self.sorted.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(self.sorted[n / 2]),
            _ => Some((self.sorted[n / 2 - 1] + self.sorted[n / 2]) / 2.0),
        }
    }

    /// The largest sample.
    pub fn max(&self) -> Option<f64> {
        self.sorted.last().copied()
    }

    /// p50 and p99 (nearest rank), if any samples.
    pub fn p50_p99(&self) -> Option<(f64, f64)> {
        Some((self.percentile(50.0)?, self.percentile(99.0)?))
    }

    /// `{"n", "p50_ms", "p99_ms", "max_ms"}` for the JSON report.
    pub fn json_ms(&self) -> serde_json::Value {
        let ms = |v: Option<f64>| v.map(|s| round3(s * 1000.0));
        serde_json::json!({
            "n": self.len(),
            "p50_ms": ms(self.percentile(50.0)),
            "p99_ms": ms(self.percentile(99.0)),
            "max_ms": ms(self.max()),
        })
    }
}

/// Round to 3 decimals (JSON figures).
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: p50 of 1..=100 is 50, p99 is 99, p100 is 100; the median averages the middle two.
    #[test]
    fn nearest_rank_percentiles() {
        let s = Samples::new((1..=100).rev().map(f64::from).collect());
        assert_eq!(s.percentile(50.0), Some(50.0));
        assert_eq!(s.percentile(99.0), Some(99.0));
        assert_eq!(s.percentile(100.0), Some(100.0));
        assert_eq!(s.median(), Some(50.5));
        let one = Samples::new(vec![7.0]);
        assert_eq!(one.p50_p99(), Some((7.0, 7.0)));
        assert_eq!(Samples::new(vec![]).percentile(50.0), None);
    }

    /// With 20 samples p99 is the largest: one slow sample is never hidden.
    #[test]
    fn p99_of_twenty_is_the_max() {
        let mut v: Vec<f64> = vec![1.0; 19];
        v.push(9.0);
        assert_eq!(Samples::new(v).percentile(99.0), Some(9.0));
    }
}
