//! The rules of the engine (docs/design.md, Invariants), each a test on its own fresh
//! PostgreSQL database. `docs/guarantees.md` maps each invariant to these tests.

mod engine {
    mod atomicity;
    mod batching;
    mod cancellation;
    mod citus;
    mod commit;
    mod connections;
    mod database_tls;
    mod dedup;
    mod dispatch;
    mod failover;
    mod intervene;
    mod isolation;
    mod leases;
    mod resume;
    mod retention;
    mod schedules;
    mod seeding;
    mod store_guards;
    mod store_layout;
}
