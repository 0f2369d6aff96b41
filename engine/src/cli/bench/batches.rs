//! What the server's natural batchers did during a workload, from its `/metrics`.

use super::Bench;

impl Bench {
    /// From the server's metrics: per natural batcher, the items and flushes so far.
    pub(super) async fn batch_totals(&self) -> BatchTotals {
        let mut totals = std::collections::BTreeMap::new();
        let Ok(response) = self.http.get(format!("{}/metrics", self.url)).send().await else {
            return totals;
        };
        let Ok(text) = response.text().await else {
            return totals;
        };
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("onceflow_batch_items_") else {
                continue;
            };
            let (Some((series, value)), Some(kind)) =
                (rest.split_once(' '), rest.split('"').nth(1))
            else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let entry: &mut (f64, f64) = totals.entry(kind.to_owned()).or_default();
            if series.starts_with("sum{") {
                entry.0 = value;
            } else if series.starts_with("count{") {
                entry.1 = value;
            }
        }
        totals
    }
}

/// Per natural batcher (by kind): the items and flushes counted so far.
pub(super) type BatchTotals = std::collections::BTreeMap<String, (f64, f64)>;

/// ` batch_<kind>=<items per flush> flushes_<kind>=<flushes>` for each batcher that
/// flushed between `before` and `after`.
pub(super) fn batch_report(before: &BatchTotals, after: &BatchTotals) -> String {
    let mut report = String::new();
    for (kind, (sum, count)) in after {
        let (sum0, count0) = before.get(kind).copied().unwrap_or_default();
        let flushes = count - count0;
        if flushes > 0.0 {
            report.push_str(&format!(
                " batch_{kind}={:.1} flushes_{kind}={flushes}",
                (sum - sum0) / flushes
            ));
        }
    }
    report
}
