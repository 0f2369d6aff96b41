//! [`Client`]: submit jobs and read them, as docs/api.md's client (and operator) endpoints.

use std::path::PathBuf;
use std::time::Duration;

use onceflow_protocol::api::{
    CancelAttemptRequest, EventList, JobList, JobRequestBody, ManualAttempt, ResumeJobRequest,
    SignalRequestBody, StuckList,
};
use onceflow_protocol::model::{
    ActivityOptions, AttemptView, JobEvent, JobView, SignalView, StuckAttempt,
};
use reqwest::Method;
use serde::Serialize;

use crate::endpoints::{Endpoints, Repeat};
use crate::error::SdkError;
use crate::http::CaCert;
use crate::transport::Transport;

const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to a submission.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The job, as it is now.
    pub job: JobView,
    /// `true` when this key and request were submitted before: this is that job, and
    /// nothing new was created.
    pub replayed: bool,
}

/// The answer to a signal.
#[derive(Debug, Clone)]
pub struct SignalSent {
    /// The signal, as recorded.
    pub signal: SignalView,
    /// `true` when this key and body were sent before: this is that signal, and nothing
    /// new was recorded.
    pub replayed: bool,
}

/// A client of the engine's HTTP API with one token.
///
/// With a `client` token it submits and reads its owner's jobs; with an `operator`
/// token it reads every owner's jobs and cancels stuck attempts.
///
/// Given several URLs (the engine's `serve` processes), a request that cannot connect to
/// one, or that is safe to repeat and finds it stopping or answering `502`/`503`/`504`,
/// moves on to the next at once (see [`Endpoints`]): a rolling restart of the engine
/// goes unnoticed. A submission is safe to repeat (its `Idempotency-Key` makes the
/// repeat answer the same job), as are reads and [`Client::cancel`];
/// [`Client::create_attempt`] and [`Client::cancel_attempt`] move on only when they
/// could not connect. The client itself does not wait and retry: when every URL failed,
/// the error is returned, and [`SdkError::is_transient`] says whether to try again.
#[derive(Clone, Debug)]
pub struct Client {
    transport: Transport,
}

impl Client {
    /// A client of the engine at `url` (e.g. `http://127.0.0.1:7380` or
    /// `https://onceflow.internal`), or at several URLs separated by commas
    /// (`http://10.0.0.1:7380,http://10.0.0.2:7380`, as `ONCEFLOW_URL` may hold). Over
    /// `https://` it trusts the system's roots plus the CA certificates of the PEM file
    /// named by `ONCEFLOW_CA_CERT`, if set; a file that cannot be read or holds no
    /// certificate is an [`SdkError::Config`] naming the variable, and so is an empty URL.
    pub fn new(url: impl AsRef<str>, token: impl Into<String>) -> Result<Self, SdkError> {
        Self::with_urls([url], token)
    }

    /// A client of the engine at `urls`, tried in order (see [`Client`]); otherwise as
    /// [`Client::new`]. No URL is an [`SdkError::Config`].
    pub fn with_urls<I, S>(urls: I, token: impl Into<String>) -> Result<Self, SdkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(Client {
            transport: Transport::new(Endpoints::new(urls)?, token, CaCert::from_env().as_ref())?,
        })
    }

    /// A client of the engine at `url` (one, or several separated by commas) that trusts
    /// the system's roots plus the CA certificates of the PEM file `ca_cert` (instead of
    /// reading `ONCEFLOW_CA_CERT`). A file that cannot be read or holds no certificate is
    /// an [`SdkError::Config`] naming it.
    pub fn with_ca_cert(
        url: impl AsRef<str>,
        token: impl Into<String>,
        ca_cert: impl Into<PathBuf>,
    ) -> Result<Self, SdkError> {
        Ok(Client {
            transport: Transport::new(
                Endpoints::parse(url.as_ref())?,
                token,
                Some(&CaCert::Explicit(ca_cert.into())),
            )?,
        })
    }

    /// The engine's URLs and the one requests go to now; its
    /// [`failovers`](Endpoints::failovers) count how often a request of this client (or a
    /// clone) moved on to the next URL.
    pub fn endpoints(&self) -> &Endpoints {
        self.transport.endpoints()
    }

    /// Submits an intent under `idempotency_key`. Submitting the same key and request
    /// again, any number of times and concurrently, returns the same job with
    /// `replayed: true`; the same key with a different request fails with
    /// `idempotency_key_reused`.
    pub async fn submit(
        &self,
        idempotency_key: &str,
        request: &JobRequestBody,
    ) -> Result<Submitted, SdkError> {
        let answer = self
            .transport
            .call::<_, JobView>(
                Repeat::Safe,
                Method::POST,
                "/v1/jobs",
                &[("Idempotency-Key", idempotency_key)],
                Some(request),
                CALL_TIMEOUT,
            )
            .await?;
        Ok(Submitted {
            job: answer.body,
            replayed: answer.replayed || answer.status == 200,
        })
    }

    /// Submits an activity job: `activity` at `providers` in order (the first is the
    /// primary), with `options`.
    pub async fn submit_activity<I: Serialize>(
        &self,
        idempotency_key: &str,
        activity: &str,
        providers: &[&str],
        input: &I,
        options: ActivityOptions,
    ) -> Result<Submitted, SdkError> {
        let body = JobRequestBody {
            workflow: None,
            activity: Some(activity.to_owned()),
            providers: Some(providers.iter().map(|p| (*p).to_owned()).collect()),
            input: Some(
                serde_json::to_value(input).map_err(|e| SdkError::Config(format!("input: {e}")))?,
            ),
            task_queue: None,
            options: Some(options.into()),
        };
        self.submit(idempotency_key, &body).await
    }

    /// A job with its activities and attempts.
    pub async fn job(&self, job_id: uuid::Uuid) -> Result<JobView, SdkError> {
        self.get(&format!("/v1/jobs/{job_id}")).await
    }

    /// A job's whole history, oldest first (read a page of up to 1000 events at a time).
    pub async fn events(&self, job_id: uuid::Uuid) -> Result<Vec<JobEvent>, SdkError> {
        let mut events = Vec::new();
        let mut after_seq = 0;
        loop {
            let page = self
                .get::<EventList>(&format!(
                    "/v1/jobs/{job_id}/events?limit=1000&after_seq={after_seq}"
                ))
                .await?;
            events.extend(page.events);
            match page.next {
                Some(next) => after_seq = next,
                None => return Ok(events),
            }
        }
    }

    /// The newest jobs (one page).
    pub async fn recent_jobs(&self, limit: u32) -> Result<Vec<JobView>, SdkError> {
        Ok(self
            .get::<JobList>(&format!("/v1/jobs?limit={limit}"))
            .await?
            .jobs)
    }

    /// Gives up the intent: the job is `cancelled`, its running attempts are told to stop,
    /// and any later result is recorded as `lost`.
    pub async fn cancel(&self, job_id: uuid::Uuid) -> Result<JobView, SdkError> {
        Ok(self
            .transport
            .call::<(), JobView>(
                Repeat::Safe,
                Method::POST,
                &format!("/v1/jobs/{job_id}/cancel"),
                &[],
                None,
                CALL_TIMEOUT,
            )
            .await?
            .body)
    }

    /// Resumes a failed job (or a parked workflow) under its own id and key, for `reason`
    /// (required): the job is `running` again; an activity job's activity gets a fresh
    /// attempt at its first provider with a fresh retry budget, a workflow replays its
    /// recorded outcomes and runs its failed step again. Any other job fails with
    /// `job_not_resumable` (as does the loser of two concurrent resumes). With a client
    /// token for its owner's jobs, with an operator token for any owner's.
    pub async fn resume(&self, job_id: uuid::Uuid, reason: &str) -> Result<JobView, SdkError> {
        let body = ResumeJobRequest {
            reason: reason.to_owned(),
        };
        Ok(self
            .transport
            .call(
                // Not repeated by itself: a resume that took effect answers
                // `job_not_resumable` the second time.
                Repeat::Unsafe,
                Method::POST,
                &format!("/v1/jobs/{job_id}/resume"),
                &[],
                Some(&body),
                CALL_TIMEOUT,
            )
            .await?
            .body)
    }

    /// Sends signal `name` with `payload` to workflow job `job_id` under `idempotency_key`
    /// (scoped to the job): one signal per key, however many times it is sent (a
    /// double-clicked "Approve" approves once); `replayed` tells a repeat. The same key
    /// with another name or payload fails with `idempotency_key_reused`; a finished job
    /// with `job_finished`, an activity job with `not_a_workflow`.
    pub async fn signal<P: Serialize>(
        &self,
        job_id: uuid::Uuid,
        name: &str,
        payload: &P,
        idempotency_key: &str,
    ) -> Result<SignalSent, SdkError> {
        let body = SignalRequestBody {
            name: name.to_owned(),
            payload: serde_json::to_value(payload)
                .map_err(|e| SdkError::Config(format!("payload: {e}")))?,
        };
        let answer = self
            .transport
            .call::<_, SignalView>(
                Repeat::Safe,
                Method::POST,
                &format!("/v1/jobs/{job_id}/signals"),
                &[("Idempotency-Key", idempotency_key)],
                Some(&body),
                CALL_TIMEOUT,
            )
            .await?;
        Ok(SignalSent {
            signal: answer.body,
            replayed: answer.replayed || answer.status == 200,
        })
    }

    /// The "try the fallback" button: a new attempt of activity `seq` at `provider`.
    /// Refused with `attempt_in_flight` while an attempt is live (even `unknown`), with
    /// `provider_not_certified` for an uncertified fallback, and with
    /// `activity_completed` once a result won.
    pub async fn create_attempt(
        &self,
        job_id: uuid::Uuid,
        seq: i32,
        provider: &str,
    ) -> Result<AttemptView, SdkError> {
        let body = ManualAttempt {
            provider: provider.to_owned(),
        };
        Ok(self
            .transport
            .call(
                Repeat::Unsafe,
                Method::POST,
                &format!("/v1/jobs/{job_id}/activities/{seq}/attempts"),
                &[],
                Some(&body),
                CALL_TIMEOUT,
            )
            .await?
            .body)
    }

    /// Waits until the job is closed (`succeeded`, `failed` or `cancelled`), polling,
    /// for at most `timeout`; returns the job as it is then.
    pub async fn wait(&self, job_id: uuid::Uuid, timeout: Duration) -> Result<JobView, SdkError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let job = self.job(job_id).await?;
            if job.status.is_closed() || tokio::time::Instant::now() >= deadline {
                return Ok(job);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Operators: attempts `started` or `unknown` (per `statuses`, e.g. `"unknown"`) for
    /// at least `older_than_s`, across owners, oldest first.
    pub async fn stuck_attempts(
        &self,
        statuses: &str,
        older_than_s: u64,
    ) -> Result<Vec<StuckAttempt>, SdkError> {
        Ok(self
            .get::<StuckList>(&format!(
                "/v1/attempts?status={statuses}&older_than_s={older_than_s}"
            ))
            .await?
            .attempts)
    }

    /// Operators: cancels a live attempt out-of-band, with a reason. Its activity then
    /// fails over; a late result of the attempt still takes part in the compare-and-swap.
    pub async fn cancel_attempt(
        &self,
        attempt_id: uuid::Uuid,
        reason: &str,
    ) -> Result<AttemptView, SdkError> {
        let body = CancelAttemptRequest {
            reason: reason.to_owned(),
        };
        Ok(self
            .transport
            .call(
                Repeat::Unsafe,
                Method::POST,
                &format!("/v1/attempts/{attempt_id}/cancel"),
                &[],
                Some(&body),
                CALL_TIMEOUT,
            )
            .await?
            .body)
    }

    /// The job's timeline, rendered for a terminal.
    pub async fn timeline(&self, job_id: uuid::Uuid) -> Result<String, SdkError> {
        let job = self.job(job_id).await?;
        let events = self.events(job_id).await?;
        Ok(onceflow_protocol::timeline::render_timeline(&job, &events))
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, SdkError> {
        Ok(self
            .transport
            .call::<(), T>(Repeat::Safe, Method::GET, path, &[], None, CALL_TIMEOUT)
            .await?
            .body)
    }
}
