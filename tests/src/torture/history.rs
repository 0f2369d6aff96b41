//! The history of a run: every request an actor made and what came back, with start and
//! end times (milliseconds since the run began), and the faults injected.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// What a request was about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `POST /v1/jobs` under `key` with `input`.
    Submit { key: String, input: Value },
    /// `POST /v1/jobs/{id}/cancel`.
    CancelJob { job_id: Uuid },
    /// `POST /v1/jobs/{id}/resume`.
    Resume { job_id: Uuid },
    /// `POST /v1/jobs/{id}/activities/0/attempts` for `provider`.
    ManualAttempt { job_id: Uuid, provider: String },
    /// `POST /v1/worker/attempts/{id}/complete`; `right_token` says whether it carried the
    /// attempt's lease token; `result` or `error` as sent.
    Complete {
        attempt_id: Uuid,
        job_id: Uuid,
        right_token: bool,
        result: Option<Value>,
        error_retryable: Option<bool>,
    },
    /// `POST /v1/worker/attempts/{id}/heartbeat`.
    Heartbeat { attempt_id: Uuid, right_token: bool },
    /// `POST /v1/attempts/{id}/cancel` by the operator.
    CancelAttempt { attempt_id: Uuid },
    /// `POST /v1/worker/poll`: the attempts it handed out.
    Poll { attempts: Vec<Uuid> },
}

/// How a request ended: an HTTP answer, or none (the connection failed, or the proxy
/// dropped the response: the request may or may not have taken effect).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The status, `None` without an answer.
    pub status: Option<u16>,
    /// `outcome` of a completion, `error.code` of an error, the job id of a submission.
    pub detail: Option<String>,
}

/// One request.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Who made it (`client-2`, `worker-0`, `operator`).
    pub actor: String,
    /// When it was sent and when its answer came (ms since the run began).
    pub start_ms: u64,
    pub end_ms: u64,
    #[serde(flatten)]
    pub op: Op,
    pub answer: Answer,
}

/// A fault the runner injected, from `start_ms` to `end_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    pub fault: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// The run's history, shared by its actors.
#[derive(Clone)]
pub struct History {
    began: Instant,
    records: Arc<Mutex<Vec<Record>>>,
    faults: Arc<Mutex<Vec<FaultRecord>>>,
}

impl History {
    /// An empty history whose clock starts now.
    pub fn new() -> History {
        History {
            began: Instant::now(),
            records: Arc::default(),
            faults: Arc::default(),
        }
    }

    /// Milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.began.elapsed().as_millis() as u64
    }

    /// Records a request.
    pub fn record(&self, actor: &str, start_ms: u64, op: Op, answer: Answer) {
        let record = Record {
            actor: actor.to_owned(),
            start_ms,
            end_ms: self.now_ms(),
            op,
            answer,
        };
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
    }

    /// Records a fault.
    pub fn fault(&self, fault: String, start_ms: u64) {
        let end_ms = self.now_ms();
        if let Ok(mut faults) = self.faults.lock() {
            faults.push(FaultRecord {
                fault,
                start_ms,
                end_ms,
            });
        }
    }

    /// Everything recorded so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The faults injected so far.
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.faults.lock().map(|f| f.clone()).unwrap_or_default()
    }
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}
