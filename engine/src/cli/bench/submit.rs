//! `--workload submit`: submissions only (distinct keys), no worker.

use std::time::Instant;

use super::Bench;

impl Bench {
    pub(super) async fn submit(&self) -> Result<(), String> {
        let names = self.names("submit");
        let n = self.jobs;
        let start = Instant::now();
        let (created, replayed) = self.produce(&names, n, 1).await?;
        let elapsed = start.elapsed();
        if created != n || replayed != 0 {
            return Err(format!(
                "submit: expected {n} new jobs, got {created} created and {replayed} replayed"
            ));
        }
        let rate = self.result("submit", n, elapsed, "");
        eprintln!(
            "bench submit: {n} submissions (distinct keys) by {} producers in {:.3} s: {rate:.1}/s",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(())
    }
}
