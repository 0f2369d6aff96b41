//! The worker SDK against a real engine (in-process server on loopback) and real
//! PostgreSQL: what a Rust developer's providers can rely on.

mod worker {
    mod lifecycle;
    mod providers;
    mod several_urls;
}
