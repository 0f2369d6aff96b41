//! The engine's own clock: the host's clock, plus an offset that tests set to play a
//! host whose clock is wrong ([`Engine::with_clock_offset`](super::Engine::with_clock_offset)).
//! Every wall-clock reading of the engine goes through it, so a test can skew one
//! engine and see what depends on that engine's clock.

use chrono::{DateTime, Duration, Utc};

/// A wall clock: the host's, shifted by `offset`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Clock {
    offset: Duration,
}

impl Clock {
    /// The host's clock shifted by `offset`.
    pub(crate) fn skewed(offset: Duration) -> Self {
        Clock { offset }
    }

    /// What this engine believes the time is.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.offset
    }
}
