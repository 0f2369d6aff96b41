//! The hot statements stay on their indexes as finished history grows: with a large
//! history of finished jobs, PostgreSQL's plans for dispatch, batched completions and
//! replays, the reaper, the timer loop and the compensation deadlines never scan `attempts`, `jobs` or `timers` sequentially,
//! whether or not the tables were ever analyzed (a server whose autovacuum is off never
//! gathers statistics), and whether the plan is generic or custom. (PostgreSQL only: it is
//! the production store, where history grows without bound.)

use onceflow_engine::store::postgres::{
    ACTIVITIES_OF_JOBS_SQL, ATTEMPTS_OF_ACTIVITIES_SQL, BEGIN_TRANSACTION_SQL, CLAIM_ATTEMPTS_SQL,
    CLAIM_WORKFLOW_TASKS_SQL, COMMIT_ACTIVITY_JOB_RESULTS_SQL, DELETE_PRUNED_JOBS_SQL,
    EXTEND_LEASES_SQL, LOCK_DUE_COMPENSATIONS_SQL, LOCK_DUE_TIMERS_SQL, LOCK_EXPIRED_LEASES_SQL,
    LOCK_JOBS_OF_ATTEMPTS_SQL, LOCK_OVERDUE_SCHEDULED_SQL, LOCK_PRUNABLE_JOBS_SQL, REPLAY_JOBS_SQL,
};
use onceflow_tests::{claim_one, llm_job, owner, quick_options, result_of, Backend, TestDb, ALICE};
use serde_json::json;

const HISTORY: u32 = 100_000;

async fn plan(db: &TestDb, mode: &str, name: &str, types: &str, sql: &str, args: &str) -> String {
    // PREPARE and EXPLAIN EXECUTE must share a session.
    let mut conn = db.pg_connection().await.expect("PostgreSQL");
    explain(&mut conn, mode, name, types, sql, args).await
}

/// [`plan`] inside a transaction begun as the engine begins its transactions.
async fn plan_in_engine_transaction(
    db: &TestDb,
    mode: &str,
    name: &str,
    types: &str,
    sql: &str,
    args: &str,
) -> String {
    let mut conn = db.pg_connection().await.expect("PostgreSQL");
    sqlx::raw_sql(BEGIN_TRANSACTION_SQL)
        .execute(&mut conn)
        .await
        .expect("begin as the engine does");
    explain(&mut conn, mode, name, types, sql, args).await
}

async fn explain(
    conn: &mut sqlx::PgConnection,
    mode: &str,
    name: &str,
    types: &str,
    sql: &str,
    args: &str,
) -> String {
    let conn = &mut *conn;
    sqlx::query(&format!("SET plan_cache_mode = {mode}"))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{mode}: {e}"));
    sqlx::query(&format!("PREPARE {name}({types}) AS {sql}"))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("prepare {name}: {e}"));
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}({args})"))
        .fetch_all(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("explain {name}: {e}"));
    lines.join("\n")
}

/// Explains every hot statement in both plan modes and checks each plan.
async fn check_plans(db: &TestDb, when: &str) {
    for mode in ["force_generic_plan", "force_custom_plan"] {
        let plans = [
            ("claim", plan(db, mode, "claim", "text, text, text[], text[], bigint, text", CLAIM_ATTEMPTS_SQL,
                "'default', NULL, ARRAY['generate'], ARRAY['primary-llm'], 16, 'w'").await),
            // A worker of one owner: its claim must range over the dispatch order, not
            // read every live attempt of its owner (which `attempts_one_live_per_activity`,
            // led by `owner_id`, would offer to a custom plan that knows the owner).
            ("owner_claim", plan(db, mode, "owner_claim", "text, text, text[], text[], bigint, text", CLAIM_ATTEMPTS_SQL,
                "'default', 'alice', ARRAY['generate'], ARRAY['primary-llm'], 16, 'w'").await),
            ("workflow_claim", plan(db, mode, "wf", "text, text[], text, bigint, text, float8", CLAIM_WORKFLOW_TASKS_SQL,
                "'default', ARRAY['summarize'], NULL, 16, 'w', 30").await),
            ("owner_workflow_claim", plan(db, mode, "owner_wf", "text, text[], text, bigint, text, float8", CLAIM_WORKFLOW_TASKS_SQL,
                "'default', ARRAY['summarize'], 'alice', 16, 'w', 30").await),
            ("completion_lock", plan(db, mode, "lock", "uuid[]", LOCK_JOBS_OF_ATTEMPTS_SQL,
                "ARRAY[md5('t1')::uuid, md5('t2')::uuid, md5('t3')::uuid]").await),
            ("batched_win", plan(db, mode, "win", "text[], uuid[], int8[], uuid[], int8[], uuid[], jsonb[], text[]",
                COMMIT_ACTIVITY_JOB_RESULTS_SQL,
                "ARRAY['history', 'history'], ARRAY[md5('j1')::uuid, md5('j2')::uuid], ARRAY[1, 1]::int8[], \
                 ARRAY[md5('a1')::uuid, md5('a2')::uuid], ARRAY[0, 0]::int8[], ARRAY[md5('t1')::uuid, md5('t2')::uuid], \
                 ARRAY['{}', '{}']::jsonb[], ARRAY['started']").await),
            ("replay_lock", plan(db, mode, "replay", "text[], text[], text[], text[], text[], text[], jsonb[]", REPLAY_JOBS_SQL,
                "ARRAY['history', 'history'], ARRAY['k1', 'k2'], ARRAY['history'], ARRAY['k1'], ARRAY['f'], ARRAY['client:history'], ARRAY['{}']::jsonb[]").await),
            ("reaper", plan(db, mode, "reaper", "bigint", LOCK_EXPIRED_LEASES_SQL, "200").await),
            ("expiry", plan(db, mode, "expiry", "bigint", LOCK_OVERDUE_SCHEDULED_SQL, "200").await),
            ("timers", plan(db, mode, "timers", "bigint", LOCK_DUE_TIMERS_SQL, "200").await),
            ("compensations", plan(db, mode, "compensations", "bigint", LOCK_DUE_COMPENSATIONS_SQL, "200").await),
            // Retention walks job ids (UUIDv7) up to the cutoff; it never reads the whole
            // history, and deletes each job's rows through their keys.
            ("retention", plan(db, mode, "retention", "float8, bigint, uuid", LOCK_PRUNABLE_JOBS_SQL, "86400, 500, NULL").await),
            ("retention_after", plan(db, mode, "retention_after", "float8, bigint, uuid", LOCK_PRUNABLE_JOBS_SQL,
                "86400, 500, '01000000-0000-7000-8000-000000000000'").await),
            ("retention_delete", plan(db, mode, "retention_delete", "text[], uuid[]", DELETE_PRUNED_JOBS_SQL,
                "ARRAY['history', 'history'], ARRAY[md5('j1')::uuid, md5('j2')::uuid]").await),
        ];
        for (name, plan) in &plans {
            for table in ["attempts", "jobs", "timers", "activities"] {
                assert!(
                    !plan.contains(&format!("Seq Scan on {table}")),
                    "{name} ({when}, {mode}) scans {table} sequentially:\n{plan}"
                );
            }
        }
        let find = |name: &str| &plans.iter().find(|(n, _)| *n == name).expect("explained").1;
        // Only statements about live attempts as such may read that index.
        for name in [
            "claim",
            "owner_claim",
            "reaper",
            "expiry",
            "batched_win",
            "completion_lock",
        ] {
            assert!(
                !find(name).contains("attempts_one_live_per_activity"),
                "{name} ({when}, {mode}) reads the live attempts' index:\n{}",
                find(name)
            );
        }
        for (name, index) in [
            ("claim", "attempts_dispatch"),
            ("owner_claim", "attempts_dispatch"),
            ("workflow_claim", "jobs_workflow_dispatch"),
            ("owner_workflow_claim", "jobs_workflow_dispatch"),
            ("completion_lock", "attempts_pkey"),
            ("replay_lock", "jobs_one_per_idempotency_key"),
            ("reaper", "attempts_lease_expiry"),
            ("expiry", "attempts_start_deadline"),
            ("timers", "timers_due"),
            ("compensations", "jobs_compensation_due"),
            ("retention", "jobs_id_unique"),
            ("retention_after", "jobs_id_unique"),
        ] {
            assert!(
                find(name).contains(index),
                "{name} ({when}, {mode}) uses {index}:\n{}",
                find(name)
            );
        }
        // Retention's delete reaches each job by its key, whichever unique index holds it.
        let delete = find("retention_delete");
        assert!(
            delete.contains("jobs_pkey on jobs") || delete.contains("jobs_id_unique on jobs"),
            "retention_delete ({when}, {mode}):\n{delete}"
        );
    }
}

/// The statements that look rows up from arrays of keys: planned while the tables are
/// small (a plan PostgreSQL may cache and keep as they grow), each still probes an index
/// per key instead of scanning a table.
async fn check_lookups_while_small(db: &TestDb) {
    for mode in ["force_generic_plan", "force_custom_plan"] {
        let plans = [
            ("claim", "attempts_dispatch", plan(db, mode, "claim", "text, text, text[], text[], bigint, text", CLAIM_ATTEMPTS_SQL,
                "'default', NULL, ARRAY['generate'], ARRAY['primary-llm'], 16, 'w'").await),
            ("replay_lock", "jobs_one_per_idempotency_key", plan(db, mode, "replay", "text[], text[], text[], text[], text[], text[], jsonb[]", REPLAY_JOBS_SQL,
                "ARRAY['alice', 'alice'], ARRAY['live-1', 'live-2'], ARRAY['alice'], ARRAY['live-1'], ARRAY['f'], ARRAY['client:alice'], ARRAY['{}']::jsonb[]").await),
            ("completion_lock", "attempts_pkey", plan(db, mode, "lock", "uuid[]", LOCK_JOBS_OF_ATTEMPTS_SQL,
                "ARRAY[md5('t1')::uuid, md5('t2')::uuid, md5('t3')::uuid]").await),
            ("view_activities", "activities_one_per_seq", plan(db, mode, "acts", "text[], uuid[]", ACTIVITIES_OF_JOBS_SQL,
                "ARRAY['alice', 'alice'], ARRAY[md5('j1')::uuid, md5('j2')::uuid]").await),
            ("view_attempts", "attempts_one_per_number", plan(db, mode, "atts", "text[], uuid[]", ATTEMPTS_OF_ACTIVITIES_SQL,
                "ARRAY['alice', 'alice'], ARRAY[md5('a1')::uuid, md5('a2')::uuid]").await),
            ("heartbeats", "attempts_pkey", plan(db, mode, "beats", "uuid[], uuid[], text[], jsonb[]", EXTEND_LEASES_SQL,
                "ARRAY[md5('t1')::uuid, md5('t2')::uuid], ARRAY[md5('x1')::uuid, md5('x2')::uuid], ARRAY['alice', NULL], \
                 ARRAY['{}', NULL]::jsonb[]").await),
            // Run by the engine in its transactions only, so planned as they plan: each
            // row it updates is reached by the ctid it locked, never by a scan.
            ("batched_win", "Tid Scan on activities a ", plan_in_engine_transaction(db, mode, "win",
                "text[], uuid[], int8[], uuid[], int8[], uuid[], jsonb[], text[]", COMMIT_ACTIVITY_JOB_RESULTS_SQL,
                "ARRAY['alice', 'alice'], ARRAY[md5('j1')::uuid, md5('j2')::uuid], ARRAY[1, 1]::int8[], \
                 ARRAY[md5('a1')::uuid, md5('a2')::uuid], ARRAY[0, 0]::int8[], ARRAY[md5('t1')::uuid, md5('t2')::uuid], \
                 ARRAY['{}', '{}']::jsonb[], ARRAY['started']").await),
        ];
        for (name, index, plan) in &plans {
            // A custom plan is made for one call and never kept: the claim's may reach the
            // few attempts it updates (`attempts t`) by scanning a table that is still tiny.
            // (Their status guard implies no partial index, so that no plan scans every
            // live attempt once the table is large; see the other tests.)
            let plan = match (*name, mode) {
                ("claim", "force_custom_plan") => {
                    plan.replace("Seq Scan on attempts t ", "(tiny table) attempts t ")
                }
                _ => plan.clone(),
            };
            for table in ["attempts", "jobs", "activities", "job_events"] {
                assert!(
                    !plan.contains(&format!("Seq Scan on {table}")),
                    "{name} (small tables, {mode}) scans {table} sequentially:\n{plan}"
                );
            }
            // The batched win reaches each activity it updates by the ctid it locked or by
            // its primary key: a direct hit either way.
            let hit = plan.contains(index)
                || (*name == "batched_win"
                    && plan.contains("Index Scan using activities_pkey on activities a "));
            assert!(hit, "{name} (small tables, {mode}) uses {index}:\n{plan}");
        }
    }
}

/// The array lookups, called as the engine calls them (a few keys at a time), settle on
/// one cached plan instead of being planned again on every call.
async fn check_lookups_settle_on_a_cached_plan(db: &TestDb) {
    let statements = [
        ("claim", "text, text, text[], text[], bigint, text", CLAIM_ATTEMPTS_SQL,
         "'no-such-queue', NULL, ARRAY['generate'], ARRAY['primary-llm'], 16, 'w'"),
        ("replay", "text[], text[], text[], text[], text[], text[], jsonb[]", REPLAY_JOBS_SQL,
         "ARRAY['alice'], ARRAY['nobody-has-this-key'], ARRAY['alice'], ARRAY['nobody-has-this-key'], ARRAY['f'], ARRAY['client:alice'], ARRAY['{}']::jsonb[]"),
        ("lock", "uuid[]", LOCK_JOBS_OF_ATTEMPTS_SQL, "ARRAY[md5('t1')::uuid, md5('t2')::uuid]"),
        ("acts", "text[], uuid[]", ACTIVITIES_OF_JOBS_SQL, "ARRAY['alice'], ARRAY[md5('j1')::uuid]"),
        ("atts", "text[], uuid[]", ATTEMPTS_OF_ACTIVITIES_SQL, "ARRAY['alice', 'alice', 'alice'], ARRAY[md5('a1')::uuid, md5('a2')::uuid, md5('a3')::uuid]"),
    ];
    for (name, types, sql, args) in statements {
        let mut conn = db.pg_connection().await.expect("PostgreSQL");
        sqlx::query("SET plan_cache_mode = auto")
            .execute(&mut conn)
            .await
            .expect("plan_cache_mode");
        sqlx::query(&format!("PREPARE {name}({types}) AS {sql}"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("prepare {name}: {e}"));
        for _ in 0..8 {
            sqlx::query(&format!("EXECUTE {name}({args})"))
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("execute {name}: {e}"));
        }
        let (generic, custom): (i64, i64) = sqlx::query_as(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1",
        )
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .expect("pg_prepared_statements");
        assert!(generic >= 3, "{name}: planned again on every call ({generic} generic plans, {custom} custom of 8 calls)");
    }
}

/// A large finished history (owner `history`) beside whatever the test holds.
async fn insert_history(db: &TestDb) {
    for sql in [
        format!("INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, status, finished_at)
                 SELECT 'history', md5('j' || i)::uuid, 'h' || i, 'f', 'activity', 'generate', 'default', '{{}}', 'succeeded', now()
                 FROM generate_series(1, {HISTORY}) i"),
        format!("INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version)
                 SELECT 'history', md5('a' || i)::uuid, md5('j' || i)::uuid, 0, 'generate', ARRAY['p'], '{{}}', 'default', '{{}}', 'succeeded', 1
                 FROM generate_series(1, {HISTORY}) i"),
        format!("INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, finished_at, lease_expires_at)
                 SELECT 'history', md5('t' || i)::uuid, md5('a' || i)::uuid, md5('j' || i)::uuid, 1, 'generate', 'default', 'p', 'succeeded', now(), NULL
                 FROM generate_series(1, {HISTORY}) i"),
        format!("INSERT INTO timers (owner_id, job_id, seq, fire_at, fired_at)
                 SELECT 'history', md5('j' || i)::uuid, 1, now(), now() FROM generate_series(1, {HISTORY}) i"),
    ] {
        db.execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// A plan cached while the tables are small stays for the life of the connection, so the
/// lookups must take their own index at every small size, not only at one: at some sizes
/// an index led by `owner_id` costs the same as the right one (both estimated one row)
/// and, older, wins the tie; a replay then read every job of its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_keep_their_index_at_every_small_size() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        // Keys and inputs as long as real ones: the tie shows once a table has outgrown the
        // ten pages PostgreSQL assumes of a table never vacuumed while it still holds about
        // 200 rows, and the key index is larger than the primary key.
        let input = json!({ "prompt": "x".repeat(200) });
        let mut submitted = 0;
        for size in [0, 50, 100, 150, 200, 250, 300, 400] {
            while submitted < size {
                engine
                    .submit(
                        ALICE,
                        &format!("checkout-session-{submitted:012}-retry"),
                        &llm_job(input.clone(), quick_options()),
                    )
                    .await
                    .expect("submitted");
                submitted += 1;
            }
            check_lookups_while_small(&db).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_queries_stay_on_partial_indexes_as_history_grows() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        // A few live jobs, and a large finished history beside them.
        for i in 0..20 {
            engine
                .submit(
                    ALICE,
                    &format!("live-{i}"),
                    &llm_job(json!({}), quick_options()),
                )
                .await
                .unwrap();
        }
        check_lookups_while_small(&db).await;
        check_lookups_settle_on_a_cached_plan(&db).await;
        insert_history(&db).await;
        // As on a server whose autovacuum is off: no statistics at all.
        check_plans(&db, "never analyzed").await;
        db.execute("ANALYZE").await.expect("ANALYZE");
        check_plans(&db, "analyzed").await;
    })
    .await;
}

/// Statistics gathered while nothing was live (a quiet hour, then ANALYZE) estimate every
/// live subset of `attempts` empty. The hot statements still take their own index ranges
/// and direct hits: a claim never reads every live attempt (the partial index of live
/// attempts, scanned whole, looked free to the planner then), whatever work arrives after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_queries_hold_when_statistics_saw_nothing_live() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        insert_history(&db).await;
        db.execute("ANALYZE").await.expect("ANALYZE");
        let engine = db.engine();
        for i in 0..20 {
            engine
                .submit(
                    ALICE,
                    &format!("burst-{i}"),
                    &llm_job(json!({}), quick_options()),
                )
                .await
                .unwrap();
        }
        check_plans(&db, "analyzed while nothing was live").await;
    })
    .await;
}

/// An activity job's row moves queued → running → succeeded by heap-only updates: no
/// index of `jobs` names a column those moves change, so they write no index entry
/// (seen in the primary key's one leaf page, which keeps one entry per row version that
/// is not heap-only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activity_job_claim_and_completion_add_no_job_index_entries() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        db.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
            .await
            .expect("pageinspect (PostgreSQL contrib)");
        let entries = || db.count("SELECT count(*) FROM bt_page_items('jobs_pkey', 1)");
        let created = engine
            .submit(ALICE, "hot", &llm_job(json!({}), quick_options()))
            .await
            .expect("submitted");
        assert_eq!(entries().await, 1, "one job, one entry");
        let task = claim_one(&engine, "primary-llm").await;
        assert_eq!(task.job_id, created.job.id);
        assert_eq!(db.strings("SELECT status FROM jobs").await, ["running"]);
        assert_eq!(
            entries().await,
            1,
            "the claim's update of the job wrote an index entry"
        );
        engine
            .complete(
                &owner(ALICE),
                task.attempt_id,
                &result_of(&task, json!({"text": "done"})),
            )
            .await
            .expect("completed");
        assert_eq!(db.strings("SELECT status FROM jobs").await, ["succeeded"]);
        assert_eq!(
            entries().await,
            1,
            "the winning result's update of the job wrote an index entry"
        );
    })
    .await;
}

/// docs/design.md's Scale-out: every table carries `owner_id` and every primary or unique key
/// includes it, so the schema can be distributed by owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unique_key_includes_the_owner() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let without_owner = db
            .strings(
                "SELECT c.relname::text FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
                   AND c.relname NOT LIKE '\\_sqlx%'
                   AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'owner_id' AND NOT a.attisdropped)
                 ORDER BY 1",
            )
            .await;
        assert_eq!(
            without_owner,
            Vec::<String>::new(),
            "tables without owner_id"
        );
        let unique_without_owner = db
            .strings(
                "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                 WHERE i.indisunique AND t.relnamespace = 'public'::regnamespace AND t.relname NOT LIKE '\\_sqlx%'
                   AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = 'owner_id'
                                    AND a.attnum = ANY (i.indkey::int2[]))
                 ORDER BY 1",
            )
            .await;
        assert_eq!(
            unique_without_owner,
            Vec::<String>::new(),
            "unique keys without owner_id"
        );
    })
    .await;
}
