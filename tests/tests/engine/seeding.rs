//! The bench's seeding (`migrations/seed/`, `onceflow bench --history`) follows the
//! schema: the jobs it writes, read back through the engine, are what the engine leaves of
//! a job it ran, on every store. A migration that adds a column the engine fills and the
//! seeding does not, or changes what a finished job's rows hold, fails here.

use std::time::Duration;

use onceflow_engine::cli::bench::history;
use onceflow_engine::model::{
    ActivityStatus, AttemptStatus, CompletionOutcome, JobStatus, JobView, Scope,
};
use onceflow_engine::{ClaimRequest, Engine, EngineError, JobListQuery, JobRequest};
use onceflow_tests::{result_of, rules, Backend, TestDb};
use serde_json::{json, Value};
use uuid::Uuid;

/// Jobs seeded per test.
const SEEDED: u64 = 50;
/// The run id of the seeding (its first three characters go into the ids).
const RUN: &str = "5eed00000000";

/// Runs, through the engine, the job a seeded one stands for: the seeded request,
/// submitted by the seeded owner, claimed by the seeded worker and completed with the
/// seeded result at its first attempt.
async fn run_like_seeded(engine: &Engine, key: &str) -> Uuid {
    let scope = Scope::Owner(history::OWNER.to_owned());
    let submitted = engine
        .submit(history::OWNER, key, &history::request())
        .await
        .expect("submits");
    let JobRequest { target, .. } = history::request();
    let onceflow_engine::JobTarget::Activity {
        name, providers, ..
    } = target
    else {
        panic!("the seeded request is an activity job");
    };
    let tasks = engine
        .claim(
            &scope,
            &ClaimRequest {
                worker_id: "bench_history".to_owned(),
                task_queue: history::request().task_queue,
                providers: vec![(name, providers[0].clone())],
                max_tasks: 1,
            },
        )
        .await
        .expect("claims");
    assert_eq!(tasks.len(), 1, "the job's attempt is handed out");
    assert_eq!(tasks[0].job_id, submitted.job.id);
    let outcome = engine
        .complete(
            &scope,
            tasks[0].attempt_id,
            &result_of(&tasks[0], history::result()),
        )
        .await
        .expect("completes");
    assert_eq!(outcome, CompletionOutcome::Won);
    submitted.job.id
}

/// A job view as JSON without what differs from job to job (ids, key, times).
fn shape(view: &JobView) -> Value {
    let mut value = serde_json::to_value(view).expect("a view serializes");
    for field in [
        "id",
        "idempotency_key",
        "created_at",
        "updated_at",
        "finished_at",
    ] {
        value[field] = json!("…");
    }
    for activity in value["activities"].as_array_mut().expect("activities") {
        activity["completed_by"] = json!("…");
        for attempt in activity["attempts"].as_array_mut().expect("attempts") {
            for field in [
                "id",
                "created_at",
                "started_at",
                "heartbeat_at",
                "finished_at",
            ] {
                attempt[field] = json!("…");
            }
        }
    }
    value
}

/// The columns of `table`, in order.
async fn columns(db: &TestDb, table: &str) -> Vec<String> {
    let sql = match db.backend() {
        Backend::Postgres => format!(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = '{table}' ORDER BY ordinal_position"
        ),
        Backend::Sqlite => format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
    };
    db.strings(&sql).await
}

/// Each column of `table` but those in `differ`, as text (`NULL` for NULL), in the rows
/// `filter` selects, ordered by `order`.
async fn row_values(
    db: &TestDb,
    table: &str,
    differ: &[&str],
    filter: &str,
    order: &str,
) -> Vec<(String, Vec<String>)> {
    let mut values = Vec::new();
    for column in columns(db, table).await {
        if differ.contains(&column.as_str()) {
            continue;
        }
        let sql = format!(
            "SELECT COALESCE(CAST({column} AS TEXT), 'NULL') FROM {table} WHERE {filter} ORDER BY {order}"
        );
        values.push((column, db.strings(&sql).await));
    }
    values
}

/// An event's data without the values that differ from job to job.
fn data_shape(data: &Value) -> Value {
    let mut data = data.clone();
    if let Some(object) = data.as_object_mut() {
        for (field, value) in object.iter_mut() {
            if ["idempotency_key", "completed_by", "lease_expires_at"].contains(&field.as_str()) {
                *value = json!("…");
            }
        }
    }
    data
}

rules! {
    async fn seeded_jobs_are_what_the_engine_leaves_of_a_job_it_ran(db) {
        let engine = db.engine();
        let scope = Scope::Owner(history::OWNER.to_owned());
        history::seed(&db.url(), RUN, SEEDED).await.expect("seeding applies to the migrated schema");
        let real = run_like_seeded(&engine, "real").await;

        // Listed through the engine, newest first: the seeded jobs finished in the past,
        // so their ids sort before the one the engine made after them.
        let listed = engine
            .list_jobs(&scope, &JobListQuery { limit: Some(500), ..JobListQuery::default() })
            .await
            .expect("lists")
            .jobs;
        let keys: Vec<&str> = listed.iter().map(|j| j.idempotency_key.as_str()).collect();
        let mut expected = vec!["real".to_owned()];
        expected.extend((1..=SEEDED).rev().map(|n| history::key(RUN, n)));
        assert_eq!(keys, expected, "the real job, then the seeded ones newest first");

        // The job view: succeeded with its result, one activity, one winning attempt, and
        // otherwise as the real one.
        let real_view = engine.job(&scope, real).await.expect("the real job reads");
        for seeded in &listed[1..] {
            let view = engine.job(&scope, seeded.id).await.expect("a seeded job reads");
            assert_eq!(view.status, JobStatus::Succeeded);
            assert_eq!(view.result, Some(history::result()));
            assert_eq!(view.activities.len(), 1);
            let activity = &view.activities[0];
            assert_eq!(activity.status, ActivityStatus::Succeeded);
            assert_eq!(activity.attempts.len(), 1);
            assert_eq!(activity.attempts[0].status, AttemptStatus::Succeeded);
            assert_eq!(activity.completed_by, Some(activity.attempts[0].id));
            assert_eq!(shape(&view), shape(&real_view), "seeded job {}", view.idempotency_key);
        }

        // The events: the real job's, in the same order, by the same actors.
        let real_events = engine.job_events(&scope, real).await.expect("events read");
        assert_eq!(real_events.len(), 5, "{real_events:?}");
        let seeded_id = listed[1].id;
        let seeded_events = engine.job_events(&scope, seeded_id).await.expect("events read");
        let outline = |events: &[onceflow_engine::model::JobEvent]| -> Vec<(i64, String, String, bool, Value)> {
            events
                .iter()
                .map(|e| (e.seq, e.kind.clone(), e.actor.clone(), e.attempt_id.is_some(), data_shape(&e.data)))
                .collect()
        };
        assert_eq!(outline(&seeded_events), outline(&real_events));
        let attempt = listed[1].activities[0].attempts[0].id;
        for event in &seeded_events {
            assert!(event.attempt_id.is_none() || event.attempt_id == Some(attempt), "{event:?}");
        }
        assert_eq!(seeded_events[0].data["idempotency_key"], json!(history::key(RUN, SEEDED)));
        assert_eq!(seeded_events[4].data["completed_by"], json!(attempt));

        // Row by row, every column (those a migration adds included) is as the engine
        // leaves it, but for what differs from job to job.
        let tables: [(&str, &[&str], &str, &str); 4] = [
            ("jobs", &["id", "idempotency_key", "completed_by", "created_at", "updated_at", "finished_at"], "id", "id"),
            ("activities", &["id", "job_id", "completed_by", "created_at", "updated_at", "finished_at"], "job_id", "seq"),
            (
                "attempts",
                &["id", "activity_id", "job_id", "lease_token", "available_at", "heartbeat_at", "started_at", "finished_at", "created_at"],
                "job_id",
                "number",
            ),
            ("job_events", &["job_id", "at", "attempt_id", "data"], "job_id", "seq"),
        ];
        for (table, differ, by_job, order) in tables {
            let real_rows = row_values(db, table, differ, &format!("{by_job} = '{real}'"), order).await;
            let seeded_rows = row_values(db, table, differ, &format!("{by_job} = '{seeded_id}'"), order).await;
            assert!(real_rows.iter().all(|(_, values)| !values.is_empty()), "{table}: the real job has rows");
            assert_eq!(seeded_rows, real_rows, "{table}: a seeded job's rows against the real job's");
        }

        // Resubmitting a seeded key with the seeded request replays the seeded job; with
        // another request it is refused, as for any job.
        let key = history::key(RUN, 7);
        let seventh = listed.iter().find(|j| j.idempotency_key == key).expect("job 7 is listed").id;
        let replay = engine.submit(history::OWNER, &key, &history::request()).await.expect("replays");
        assert!(replay.replayed, "a seeded key with its request replays");
        assert_eq!(replay.job.id, seventh);
        assert_eq!(replay.job.status, JobStatus::Succeeded);
        let other = JobRequest { input: json!({"another": "request"}), ..history::request() };
        assert!(matches!(
            engine.submit(history::OWNER, &key, &other).await,
            Err(EngineError::IdempotencyKeyReused { job_id }) if job_id == seventh
        ));
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 1 + SEEDED as i64, "no new job");

        // Retention prunes seeded jobs as it prunes the real one, everything they own with them.
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        let pruned = engine.prune_finished_jobs(Duration::from_secs(1), 20).await.expect("prunes");
        assert_eq!(pruned, 1 + SEEDED);
        for table in ["jobs", "activities", "attempts", "job_events"] {
            assert_eq!(db.count(&format!("SELECT count(*) FROM {table}")).await, 0, "{table} is empty");
        }
        let again = engine.submit(history::OWNER, &key, &history::request()).await.expect("submits");
        assert!(!again.replayed, "a pruned seeded key is free again");
    }

    async fn the_seeding_statements_are_not_migrations(db) {
        // `migrations/seed/` is beside `migrations/<store>/`, whose files are every
        // migration applied (and the seeding's are not among them).
        let dir = match db.backend() {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        };
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(dir);
        let files = std::fs::read_dir(&path).expect("the migrations folder").count() as i64;
        assert_eq!(db.count("SELECT count(*) FROM _sqlx_migrations").await, files);
        let applied = db.strings("SELECT description FROM _sqlx_migrations").await;
        for seed in ["jobs", "activities", "attempts", "job_events"] {
            assert!(!applied.iter().any(|d| d == seed), "{seed} applied as a migration: {applied:?}");
        }
    }
}
