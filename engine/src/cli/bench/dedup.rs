//! `--workload dedup`: every key submitted twice concurrently, one job per key.

use std::time::Instant;

use super::batches::batch_report;
use super::Bench;

impl Bench {
    pub(super) async fn dedup(&self) -> Result<(), String> {
        let names = self.names("dedup");
        let keys = (self.jobs / 2).max(1);
        let submits = keys * 2;
        let batches_before = self.batch_totals().await;
        let start = Instant::now();
        let (created, replayed) = self.produce(&names, submits, 2).await?;
        let elapsed = start.elapsed();
        let batches = batch_report(&batches_before, &self.batch_totals().await);
        let (jobs, listed) = self.count_jobs(&names, None, keys).await?;
        if jobs != keys || listed != keys || created != keys || replayed != keys {
            return Err(format!(
                "dedup: {keys} keys submitted twice each should make {keys} jobs; found {jobs} of this run ({listed} listed), \
                 answers: {created} created, {replayed} replayed"
            ));
        }
        let rate = self.result(
            "dedup",
            submits,
            elapsed,
            &format!(" jobs_created={jobs}{batches}"),
        );
        eprintln!(
            "bench dedup: {submits} submissions of {keys} keys (each twice, concurrently) by {} producers in {:.3} s: \
             {rate:.1} submissions/s; {jobs} jobs exist ({created} created, {replayed} replayed)",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(())
    }
}
