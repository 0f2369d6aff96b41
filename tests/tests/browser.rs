//! The web UI in a real headless Chromium (Debian's `chromium` and `chromium-driver`),
//! driven over WebDriver against a real server: an operator finds the seed story's stuck
//! attempt, cancels it with a reason, and watches the fallback win on the job's timeline.
//!
//! `scripts/test` installs Chromium and chromedriver when they are missing; without them
//! these tests fail (never skip) and say what to install.

mod browser {
    mod resume;
    mod schedules;
    mod story;
    mod workflows;
}
