//! Workflows as Rust code, against a real engine and real PostgreSQL: replay, commands
//! under the job-version CAS, durable timers, non-determinism, crashes.

mod workflow {
    mod cancellation;
    mod children;
    mod engine_side;
    mod long_histories;
    mod resume;
    mod sdk;
    mod signals;
    mod versioning;
}
