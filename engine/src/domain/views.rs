//! Read views: a job with its activities and attempts, its history, job lists and stuck
//! attempts. Reads never change state.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Engine;
use crate::error::EngineError;
use crate::model::{AttemptStatus, JobEvent, JobKind, JobStatus, JobView, Scope, StuckAttempt};
use crate::store::{JobQuery, StuckQuery};

/// Filters for [`Engine::list_jobs`].
#[derive(Debug, Clone, Default)]
pub struct JobListQuery {
    /// Narrow an all-owners scope to one owner (ignored for a single-owner scope).
    pub owner: Option<String>,
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only workflow jobs running this workflow.
    pub workflow: Option<String>,
    /// Only activity jobs running this activity.
    pub activity: Option<String>,
    /// 1 to 500; default 50.
    pub limit: Option<u32>,
    /// The cursor from a previous page's `next`.
    pub after: Option<String>,
    /// Only jobs created at or after this moment.
    pub created_after: Option<DateTime<Utc>>,
    /// Only jobs created before this moment.
    pub created_before: Option<DateTime<Utc>>,
}

/// One page of jobs, newest first.
#[derive(Debug, Clone)]
pub struct JobPage {
    /// The jobs of this page, newest first, each with its activities and attempts.
    pub jobs: Vec<JobView>,
    /// The cursor of the next page, if there is one.
    pub next: Option<String>,
}

/// Filters for [`Engine::stuck_attempts`].
#[derive(Debug, Clone)]
pub struct StuckAttemptsQuery {
    /// Some of `started`, `unknown`; empty means both.
    pub statuses: Vec<AttemptStatus>,
    /// Only attempts in their status for at least this long.
    pub older_than_s: u64,
    /// 1 to 500; default 100.
    pub limit: Option<u32>,
}

/// The most events one page of a job's history holds.
pub const MAX_EVENTS_PAGE: u64 = 1000;

/// The oldest age a query of stuck attempts may ask for: 100 years.
pub const MAX_AGE_S: u64 = 100 * 365 * 24 * 3600;

impl Engine {
    /// A job visible in `scope`, with its activities and their attempts. Another owner's
    /// job answers [`EngineError::NotFound`] (invariant 8).
    pub async fn job(&self, scope: &Scope, job_id: Uuid) -> Result<JobView, EngineError> {
        let mut view = self
            .store
            .job_view(scope, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        if view.kind == JobKind::Workflow {
            let signals = self.store.job_signals(&view.owner, job_id).await?;
            view.signals = Some(signals.iter().map(|s| s.view(job_id)).collect());
        }
        Ok(view)
    }

    /// A job's append-only history, in order, whole.
    pub async fn job_events(
        &self,
        scope: &Scope,
        job_id: Uuid,
    ) -> Result<Vec<JobEvent>, EngineError> {
        self.store
            .job_events(scope, job_id, 0, None)
            .await?
            .ok_or(EngineError::NotFound)
    }

    /// A page of a job's history: the events numbered above `after_seq` (default 0), in
    /// order, at most `limit` (default 100, 1 to 1000), and the `seq` to pass as
    /// `after_seq` for the next page (`None` on the last page).
    pub async fn job_events_page(
        &self,
        scope: &Scope,
        job_id: Uuid,
        after_seq: Option<u64>,
        limit: Option<u64>,
    ) -> Result<(Vec<JobEvent>, Option<i64>), EngineError> {
        let limit = limit.unwrap_or(100);
        if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
            return Err(EngineError::invalid_request(format!(
                "limit: must be between 1 and {MAX_EVENTS_PAGE}"
            )));
        }
        let after_seq = i64::try_from(after_seq.unwrap_or(0)).map_err(|_| {
            EngineError::invalid_request(format!("after_seq: must be at most {}", i64::MAX))
        })?;
        // One more than the page: whether another page follows.
        let mut events = self
            .store
            .job_events(scope, job_id, after_seq, Some(limit as i64 + 1))
            .await?
            .ok_or(EngineError::NotFound)?;
        let next = if events.len() as u64 > limit {
            events.truncate(limit as usize);
            events.last().map(|e| e.seq)
        } else {
            None
        };
        Ok((events, next))
    }

    /// Jobs visible in `scope`, newest first, a page at a time.
    pub async fn list_jobs(
        &self,
        scope: &Scope,
        query: &JobListQuery,
    ) -> Result<JobPage, EngineError> {
        let limit = query.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(EngineError::invalid_request(
                "limit: must be between 1 and 500",
            ));
        }
        let before_id = match &query.after {
            None => None,
            Some(cursor) => Some(Uuid::parse_str(cursor).map_err(|_| {
                EngineError::invalid_request("after: not a cursor from a previous page")
            })?),
        };
        let owner = match scope {
            Scope::Owner(o) => Some(o.clone()),
            Scope::AllOwners => query.owner.clone(),
        };
        let mut jobs = self
            .store
            .list_jobs(&JobQuery {
                owner,
                status: query.status,
                workflow: query.workflow.clone(),
                activity: query.activity.clone(),
                before_id,
                created_after: query.created_after,
                created_before: query.created_before,
                limit: i64::from(limit) + 1,
            })
            .await?;
        let next = if jobs.len() > limit as usize {
            jobs.truncate(limit as usize);
            jobs.last().map(|j| j.id.to_string())
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }

    /// Attempts `started` or `unknown` for at least `older_than_s`, across owners, oldest
    /// first. Age counts from `started_at` for `started` and from the moment the lease
    /// expired for `unknown`.
    pub async fn stuck_attempts(
        &self,
        query: &StuckAttemptsQuery,
    ) -> Result<Vec<StuckAttempt>, EngineError> {
        if query.older_than_s > MAX_AGE_S {
            return Err(EngineError::invalid_request(format!(
                "older_than_s: must be at most {MAX_AGE_S} (100 years)"
            )));
        }
        let limit = query.limit.unwrap_or(100);
        if !(1..=500).contains(&limit) {
            return Err(EngineError::invalid_request(
                "limit: must be between 1 and 500",
            ));
        }
        let mut statuses = query.statuses.clone();
        if statuses.is_empty() {
            statuses = vec![AttemptStatus::Started, AttemptStatus::Unknown];
        }
        if let Some(other) = statuses
            .iter()
            .find(|s| !matches!(s, AttemptStatus::Started | AttemptStatus::Unknown))
        {
            return Err(EngineError::invalid_request(format!(
                "status: `{other}` is not a stuck status (use started, unknown)"
            )));
        }
        Ok(self
            .store
            .stuck_attempts(&StuckQuery {
                statuses,
                older_than_s: query.older_than_s,
                limit: i64::from(limit),
            })
            .await?)
    }
}
