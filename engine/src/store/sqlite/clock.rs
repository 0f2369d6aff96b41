//! The store's clock (microseconds since the epoch, taken once per transaction) and
//! the lease arithmetic that PostgreSQL does in its statements.

use chrono::Utc;

use crate::model::ActivityOptions;

pub(super) fn now_us() -> i64 {
    Utc::now().timestamp_micros()
}

pub(super) fn secs_us(secs: Option<u64>) -> Option<i64> {
    secs.map(|s| (s as i64).saturating_mul(1_000_000))
}

/// `lease_expires_at` for an attempt started at `started` and renewed at `now`:
/// `min(now + heartbeat_timeout, started + start_to_close)`, `None` when neither is set.
pub(super) fn lease_until(options: &ActivityOptions, now: i64, started: i64) -> Option<i64> {
    let by_heartbeat = secs_us(options.heartbeat_timeout_s).map(|d| now + d);
    let by_deadline = secs_us(options.start_to_close_timeout_s).map(|d| started + d);
    match (by_heartbeat, by_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
