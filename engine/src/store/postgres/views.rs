//! Job views: a job's activities and attempts read in two statements for many jobs.

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::decode::*;
use super::queries::*;
use crate::model::JobView;
use crate::store::*;

/// Assembles job views from rows fetched in three queries.
pub(super) async fn assemble_views(pool: &PgPool, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let owners: Vec<String> = jobs.iter().map(|j| j.owner_id.clone()).collect();
    let ids: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    let activity_rows = sqlx::query(ACTIVITIES_OF_JOBS_SQL)
        .bind(&owners)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    let activities: Vec<ActivityRow> = activity_rows
        .iter()
        .map(activity_row)
        .collect::<StoreResult<_>>()?;
    // By activity, on the (owner, activity, number) key: no index leads with the job.
    let activity_owners: Vec<&str> = activities.iter().map(|a| a.owner_id.as_str()).collect();
    let activity_ids: Vec<Uuid> = activities.iter().map(|a| a.id).collect();
    let attempt_rows = sqlx::query(ATTEMPTS_OF_ACTIVITIES_SQL)
        .bind(&activity_owners)
        .bind(&activity_ids)
        .fetch_all(pool)
        .await?;
    let attempts: Vec<AttemptRow> = attempt_rows
        .iter()
        .map(attempt_row)
        .collect::<StoreResult<_>>()?;
    Ok(jobs
        .into_iter()
        .map(|job| view_of(job, &activities, &attempts))
        .collect())
}
