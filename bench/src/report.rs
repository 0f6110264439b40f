//! The markdown table and the JSON figures (`target/bench/latest.json`).

use serde_json::{json, Value};

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// `P1 N=110`, …
    pub scenario: String,
    /// What is measured.
    pub measure: String,
    /// The agent's figure.
    pub agent: String,
    /// The baseline's figure (or dockerd's, or empty).
    pub baseline: String,
    /// The target, if this row has one.
    pub target: String,
    /// `met`, `MISSED`, `n/a`, or empty.
    pub verdict: String,
}

/// Everything measured in one invocation.
#[derive(Debug, Default)]
pub struct Report {
    /// Table rows, in order.
    pub rows: Vec<Row>,
    /// Structured figures per scenario.
    pub scenarios: serde_json::Map<String, Value>,
    /// Target checks: id, target, value, met.
    pub targets: Vec<Value>,
    /// Scenarios that failed, with the error.
    pub errors: Vec<String>,
}

/// `met` / `MISSED` for a figure against a bound (`value ≤ bound`).
pub fn verdict(value: Option<f64>, bound: f64) -> String {
    match value {
        Some(v) if v <= bound => "met".to_string(),
        Some(_) => "MISSED".to_string(),
        None => "n/a".to_string(),
    }
}

impl Report {
    /// Adds a row.
    pub fn row(&mut self, scenario: &str, measure: &str, agent: String, baseline: String) {
        self.rows.push(Row {
            scenario: scenario.to_string(),
            measure: measure.to_string(),
            agent,
            baseline,
            target: String::new(),
            verdict: String::new(),
        });
    }

    /// Adds a row judged against a target `value ≤ bound` (`value` in the unit of `bound`).
    #[allow(clippy::too_many_arguments)]
    pub fn target_row(
        &mut self,
        id: &str,
        scenario: &str,
        measure: &str,
        agent: String,
        baseline: String,
        target_text: &str,
        value: Option<f64>,
        bound: f64,
    ) {
        let verdict = verdict(value, bound);
        self.targets.push(json!({
            "id": id,
            "scenario": scenario,
            "measure": measure,
            "target": target_text,
            "value": value,
            "bound": bound,
            "met": value.map(|v| v <= bound),
        }));
        self.rows.push(Row {
            scenario: scenario.to_string(),
            measure: measure.to_string(),
            agent,
            baseline,
            target: target_text.to_string(),
            verdict,
        });
    }

    /// Adds a row for a target that this run could not judge (feature missing, quick run).
    pub fn unjudged_row(&mut self, id: &str, scenario: &str, measure: &str, agent: String, target_text: &str) {
        self.targets.push(json!({
            "id": id,
            "scenario": scenario,
            "measure": measure,
            "target": target_text,
            "value": null,
            "met": null,
        }));
        self.rows.push(Row {
            scenario: scenario.to_string(),
            measure: measure.to_string(),
            agent,
            baseline: String::new(),
            target: target_text.to_string(),
            verdict: "n/a".to_string(),
        });
    }

    /// Stores a scenario's structured figures.
    pub fn figures(&mut self, key: &str, value: Value) {
        self.scenarios.insert(key.to_string(), value);
    }

    /// The markdown table.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| scenario | measure | agent | baseline / beside | target | verdict |\n|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.scenario, r.measure, r.agent, r.baseline, r.target, r.verdict
            ));
        }
        out
    }

    /// The JSON document, with `header` (date, commit, machine, settings) merged in.
    pub fn json(&self, header: Value) -> Value {
        let mut doc = match header {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        doc.insert("scenarios".into(), Value::Object(self.scenarios.clone()));
        doc.insert("targets".into(), Value::Array(self.targets.clone()));
        doc.insert(
            "rows".into(),
            Value::Array(
                self.rows
                    .iter()
                    .map(|r| {
                        json!({
                            "scenario": r.scenario, "measure": r.measure, "agent": r.agent,
                            "baseline": r.baseline, "target": r.target, "verdict": r.verdict,
                        })
                    })
                    .collect(),
            ),
        );
        doc.insert("errors".into(), json!(self.errors));
        Value::Object(doc)
    }
}

/// Seconds as milliseconds with one decimal: `12.3 ms`.
pub fn ms(secs: Option<f64>) -> String {
    secs.map_or("n/a".to_string(), |s| format!("{:.1} ms", s * 1000.0))
}

/// Seconds as milliseconds with three decimals, for sub-millisecond figures.
pub fn ms3(secs: Option<f64>) -> String {
    secs.map_or("n/a".to_string(), |s| format!("{:.3} ms", s * 1000.0))
}

/// Seconds with two decimals: `1.23 s`.
pub fn secs(s: Option<f64>) -> String {
    s.map_or("n/a".to_string(), |s| format!("{s:.2} s"))
}

/// Cores with three decimals: `0.012 cores`.
pub fn cores(c: Option<f64>) -> String {
    c.map_or("n/a".to_string(), |c| format!("{c:.3} cores"))
}

/// kB as MiB with one decimal.
pub fn mib(kb: Option<u64>) -> String {
    kb.map_or("n/a".to_string(), |kb| format!("{:.1} MiB", kb as f64 / 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows render as a markdown table; targets are judged `value ≤ bound`.
    #[test]
    fn rows_render_and_targets_judge() {
        let mut r = Report::default();
        r.target_row(
            "P3",
            "P3",
            "p99",
            ms(Some(0.04)),
            String::new(),
            "≤ 50 ms",
            Some(40.0),
            50.0,
        );
        r.target_row(
            "P7",
            "P7",
            "p99",
            ms3(Some(0.002)),
            String::new(),
            "≤ 1 ms",
            Some(2.0),
            1.0,
        );
        r.unjudged_row("P6", "P6", "p50/p99", "n/a".into(), "≤ 50 ms");
        let md = r.markdown();
        assert!(md.contains("| P3 | p99 | 40.0 ms |  | ≤ 50 ms | met |"), "{md}");
        assert!(md.contains("| P7 | p99 | 2.000 ms |  | ≤ 1 ms | MISSED |"), "{md}");
        assert!(md.contains("| P6 | p50/p99 | n/a |  | ≤ 50 ms | n/a |"), "{md}");
        let doc = r.json(json!({"commit": "abc"}));
        assert_eq!(doc["commit"], "abc");
        assert_eq!(doc["targets"][0]["met"], true);
        assert_eq!(doc["targets"][1]["met"], false);
        assert!(doc["targets"][2]["met"].is_null());
    }
}
