//! The engine's half: workflow tasks are leased and their commands applied once.

use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::{ErrorInfo, Scope};
use onceflow_engine::{ClaimRequest, Engine, JobRequest, WorkflowTaskOutcome};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, JournalEntry, Task, WorkflowCommand, WorkflowTask,
};
use onceflow_tests::{code_of, event_types, rules, wait_for, ALICE};
use serde_json::json;

async fn workflow_task(engine: &Engine, worker: &str) -> Option<WorkflowTask> {
    let request = ClaimRequest {
        worker_id: worker.into(),
        task_queue: "default".into(),
        providers: vec![],
        max_tasks: 1,
    };
    engine
        .claim_tasks(&Scope::AllOwners, &request, &["pipeline".to_owned()])
        .await
        .unwrap()
        .into_iter()
        .find_map(|t| match t {
            Task::Workflow(w) => Some(w),
            Task::Activity(_) => None,
        })
}

fn schedule(seq: i32, name: &str) -> WorkflowCommand {
    WorkflowCommand::ScheduleActivity {
        seq,
        activity: name.into(),
        providers: vec![name.into()],
        input: json!({"step": seq}),
        options: None,
    }
}

rules! {
    async fn a_zero_length_timer_fires_as_it_starts_and_wakes_its_workflow(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine, "w").await.unwrap();
        engine.complete_workflow_task(&Scope::AllOwners, job.id, &CompleteWorkflowTaskRequest {
            lease_token: t1.lease_token, read_version: t1.read_version,
            commands: vec![WorkflowCommand::StartTimer { seq: 0, duration_ms: 0 }], sticky_horizon: None }).await.unwrap();
        // No reaper pass: the timer fired with the task that started it.
        let t2 = workflow_task(&engine, "w").await.expect("the fired timer woke the workflow");
        assert!(matches!(t2.journal.as_slice(), [JournalEntry::Timer { seq: 0, fired_at: Some(_), arrival: Some(1), .. }]), "{:?}", t2.journal);
        assert_eq!(engine.reap().await.unwrap().timers_fired, 0, "fired once");
        let events = event_types(&engine, job.id).await;
        assert_eq!(events.iter().filter(|e| *e == "timer_fired").count(), 1, "{events:?}");
    }

    async fn two_workers_completing_the_same_workflow_task_apply_it_once(db) {
        let (engines, _turn) = db.separate_engines(6).await;
        let job = engines[0].submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let task = workflow_task(&engines[0], "w1").await.expect("a workflow task");
        assert!(task.journal.is_empty());
        let request = CompleteWorkflowTaskRequest { lease_token: task.lease_token, read_version: task.read_version, commands: vec![schedule(0, "fetch")], sticky_horizon: None };
        let outcomes = join_all(engines.iter().map(|e| e.complete_workflow_task(&Scope::AllOwners, job.id, &request))).await;
        // One applies; every other finds the job moved on past the version its task read
        // (the winner's CAS), so it is `stale`: never an error, never applied twice.
        let applied = outcomes.iter().filter(|o| matches!(o, Ok(WorkflowTaskOutcome::Applied))).count();
        let stale = outcomes.iter().filter(|o| matches!(o, Ok(WorkflowTaskOutcome::Stale))).count();
        assert_eq!((applied, stale), (1, engines.len() - 1), "one of six identical completions applies, the others are stale: {outcomes:?}");
        let view = engines[0].job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.activities.len(), 1);
        assert_eq!(view.activities[0].attempts.len(), 1);
        let completed = event_types(&engines[0], job.id).await.iter().filter(|e| *e == "workflow_task_completed").count();
        assert_eq!(completed, 1);
    }

    async fn an_expired_workflow_task_is_handed_out_again_and_the_stale_one_loses(db) {
        let engine = db.engine().with_workflow_task_lease(Duration::from_millis(300));
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let first = workflow_task(&engine, "w1").await.unwrap();
        assert!(workflow_task(&engine, "w2").await.is_none(), "leased: not handed out twice");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let second = loop {
            if let Some(task) = workflow_task(&engine, "w2").await {
                break task;
            }
            assert!(tokio::time::Instant::now() < deadline, "the expired task was never handed out again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_ne!(first.lease_token, second.lease_token);
        let stale = CompleteWorkflowTaskRequest { lease_token: first.lease_token, read_version: first.read_version, commands: vec![schedule(0, "fetch")], sticky_horizon: None };
        assert_eq!(code_of(&engine.complete_workflow_task(&Scope::AllOwners, job.id, &stale).await), "lease_lost");
        let fresh = CompleteWorkflowTaskRequest { lease_token: second.lease_token, read_version: second.read_version, commands: vec![schedule(0, "fetch")], sticky_horizon: None };
        assert_eq!(engine.complete_workflow_task(&Scope::AllOwners, job.id, &fresh).await.unwrap(), WorkflowTaskOutcome::Applied);
        assert_eq!(engine.job(&Scope::AllOwners, job.id).await.unwrap().activities.len(), 1);
    }

    async fn a_command_contradicting_the_journal_parks_the_job(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine, "w").await.unwrap();
        engine.complete_workflow_task(&Scope::AllOwners, job.id, &CompleteWorkflowTaskRequest {
            lease_token: t1.lease_token, read_version: t1.read_version, commands: vec![schedule(0, "fetch")], sticky_horizon: None }).await.unwrap();
        // A replay that now asks for another activity at position 0 (a buggy SDK or a
        // changed workflow) is caught by the engine too.
        engine.cancel_attempt("ops", engine.job(&Scope::AllOwners, job.id).await.unwrap().activities[0].attempts[0].id, "make it final").await.unwrap();
        let t2 = workflow_task(&engine, "w").await.expect("the activity's end wakes the workflow");
        let outcome = engine.complete_workflow_task(&Scope::AllOwners, job.id, &CompleteWorkflowTaskRequest {
            lease_token: t2.lease_token, read_version: t2.read_version, commands: vec![schedule(0, "other")], sticky_horizon: None }).await.unwrap();
        assert_eq!(outcome, WorkflowTaskOutcome::Applied);
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.error.as_ref().map(|e| e.code.as_str()), Some("nondeterminism"));
        assert_eq!(view.status.as_str(), "running", "parked, not silently re-planned or failed");
        assert!(event_types(&engine, job.id).await.contains(&"workflow_task_failed".to_owned()));
        assert!(workflow_task(&engine, "w").await.is_none(), "a parked workflow gets no more tasks");
        let _ = ErrorInfo::new("x", "y");
    }

    async fn the_journal_numbers_outcomes_in_the_order_they_arrived(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine, "w").await.unwrap();
        engine.complete_workflow_task(&Scope::AllOwners, job.id, &CompleteWorkflowTaskRequest {
            lease_token: t1.lease_token, read_version: t1.read_version,
            commands: vec![schedule(0, "fetch"), WorkflowCommand::StartTimer { seq: 1, duration_ms: 200 }, schedule(2, "store")], sticky_horizon: None }).await.unwrap();
        let attempt_of = |seq: i32| {
            let engine = &engine;
            async move {
                let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
                view.activities.iter().find(|a| a.seq == seq).unwrap().attempts[0].id
            }
        };
        // Outcomes arrive out of position order, with no workflow task in between: store
        // (position 2) ends for good, then the timer (1) fires, then fetch (0) ends.
        engine.cancel_attempt("ops", attempt_of(2).await, "store ends first").await.unwrap();
        let due = chrono::Utc::now() + chrono::Duration::milliseconds(300);
        wait_for("the timer to be due", Duration::from_secs(10), || async { chrono::Utc::now() > due }).await;
        assert_eq!(engine.reap().await.unwrap().timers_fired, 1);
        engine.cancel_attempt("ops", attempt_of(0).await, "fetch ends last").await.unwrap();
        let t2 = workflow_task(&engine, "w").await.expect("the outcomes wake the workflow");
        let arrivals: Vec<(i32, Option<i64>)> = t2.journal.iter().map(|e| (e.seq(), e.arrival())).collect();
        assert_eq!(arrivals, vec![(0, Some(3)), (1, Some(2)), (2, Some(1))], "{:?}", t2.journal);
    }

    async fn concurrent_timer_loops_fire_each_timer_once(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        let engine = &engines[0];
        let mut jobs = Vec::new();
        for i in 0..10 {
            let job = engine.submit(ALICE, &format!("k{i}"), &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
            let task = workflow_task(engine, "w").await.unwrap();
            engine.complete_workflow_task(&Scope::AllOwners, task.job_id, &CompleteWorkflowTaskRequest {
                lease_token: task.lease_token, read_version: task.read_version,
                commands: vec![WorkflowCommand::StartTimer { seq: 0, duration_ms: 300 }], sticky_horizon: None }).await.unwrap();
            jobs.push(job.id);
        }
        let all_due = chrono::Utc::now() + chrono::Duration::milliseconds(400);
        wait_for("the timers to be due", Duration::from_secs(10), || async { chrono::Utc::now() > all_due }).await;
        let reports = join_all(engines.iter().map(|e| e.reap())).await;
        let fired: u64 = reports.into_iter().map(|r| r.unwrap().timers_fired).sum();
        assert_eq!(fired, 10);
        let events = db.count("SELECT count(*) FROM job_events WHERE type = 'timer_fired'").await;
        assert_eq!(events, 10, "each timer fired once");
        for id in jobs {
            let ready = db.boolean(&format!("SELECT wf_ready FROM jobs WHERE id = '{id}'")).await;
            assert!(ready, "a fired timer wakes its workflow");
        }
    }
}
