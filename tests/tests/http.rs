//! docs/api.md over real HTTP on loopback, against real PostgreSQL: every path, status code,
//! error code and header a client relies on.

mod http {
    mod api_docs;
    mod auth;
    mod cli;
    mod dev;
    mod failover_db;
    mod fuzz;
    mod hardening;
    mod jobs;
    mod limits;
    mod metrics;
    mod process;
    mod restart;
    mod rolling_restart;
    mod schedules;
    mod service;
    mod story;
    mod telemetry;
    mod tls;
    mod ui;
    mod worker;
}
