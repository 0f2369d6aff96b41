//! Invariant 7: a state change and its events are one transaction. When the event cannot
//! be written, the change is not made either: nothing of it is left behind, and the same
//! change can be made again once the events can be written.

use onceflow_engine::model::{AttemptStatus, CompletionOutcome, JobStatus, Scope};
use onceflow_tests::{
    claim_one, code_of, event_types, llm_job, owner, quick_options, result_of, rules, Backend,
    TestDb, ALICE,
};
use serde_json::json;

/// Makes every insert of a `kind` event into `job_events` fail, as a database that
/// cannot write the event would: a CHECK constraint on PostgreSQL (which Citus carries to
/// every shard, where it refuses triggers), a trigger with `RAISE(ABORT, …)` on SQLite
/// (which cannot add a constraint to a table).
async fn refuse_events(db: &TestDb, kind: &str) {
    let sql = match db.backend() {
        Backend::Postgres => {
            format!("ALTER TABLE job_events ADD CONSTRAINT refuse_event CHECK (type <> '{kind}')")
        }
        Backend::Sqlite => format!(
            "CREATE TRIGGER refuse_event BEFORE INSERT ON job_events FOR EACH ROW
             WHEN NEW.type = '{kind}'
             BEGIN SELECT RAISE(ABORT, 'the test refuses {kind} events'); END"
        ),
    };
    db.execute(&sql).await.expect("refuse the events");
}

/// Lets the events of [`refuse_events`] be written again.
async fn accept_events(db: &TestDb) {
    let sql = match db.backend() {
        Backend::Postgres => "ALTER TABLE job_events DROP CONSTRAINT refuse_event",
        Backend::Sqlite => "DROP TRIGGER refuse_event",
    };
    db.execute(sql).await.expect("accept the events again");
}

rules! {
    async fn a_submission_whose_event_cannot_be_written_leaves_no_job_behind(db) {
        let engine = db.engine();
        refuse_events(db, "job_created").await;
        let refused = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await;
        assert_eq!(code_of(&refused), "internal", "the submission fails: {refused:?}");
        for table in ["jobs", "activities", "attempts", "job_events"] {
            assert_eq!(db.count(&format!("SELECT count(*) FROM {table}")).await, 0, "no row of the submission is left in {table}");
        }
        // The key was never taken: once the event can be written, the same submission
        // makes the job.
        accept_events(db).await;
        let made = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap();
        assert!(!made.replayed, "a new job");
        assert_eq!(event_types(&engine, made.job.id).await[0], "job_created");
    }

    async fn a_completion_whose_event_cannot_be_written_changes_nothing(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        let before = engine.job(&owner(ALICE), job.id).await.unwrap();
        let events_before = event_types(&engine, job.id).await;
        refuse_events(db, "attempt_succeeded").await;
        let refused = engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "done"}))).await;
        assert_eq!(code_of(&refused), "internal", "the completion fails: {refused:?}");
        // Neither the win, nor the attempt's end, nor the job's.
        let after = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(after, before, "nothing of the completion is left");
        assert_eq!((after.status, after.activities[0].attempts[0].status), (JobStatus::Running, AttemptStatus::Started));
        assert_eq!(event_types(&engine, job.id).await, events_before);
        // The attempt's holder completes it once the event can be written.
        accept_events(db).await;
        let outcome = engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "done"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Succeeded);
    }
}
