//! What the server's natural batchers did during a workload, from its `/metrics`.

use super::Bench;

impl Bench {
    /// From the servers' metrics: per natural batcher, the items and flushes so far,
    /// summed over every server.
    pub(super) async fn batch_totals(&self) -> BatchTotals {
        let mut totals = BatchTotals::new();
        for url in &self.urls {
            self.add_batch_totals(url, &mut totals).await;
        }
        totals
    }

    async fn add_batch_totals(&self, url: &str, totals: &mut BatchTotals) {
        let Ok(response) = self.http.get(format!("{url}/metrics")).send().await else {
            return;
        };
        let Ok(text) = response.text().await else {
            return;
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
                entry.0 += value;
            } else if series.starts_with("count{") {
                entry.1 += value;
            }
        }
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
