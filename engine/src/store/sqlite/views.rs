//! Job views: a job's activities and attempts, read job by job.

use sqlx::sqlite::SqlitePool;

use super::decode::*;
use super::queries::*;
use crate::model::JobView;
use crate::store::*;

pub(super) async fn assemble_views(
    pool: &SqlitePool,
    jobs: Vec<JobRow>,
) -> StoreResult<Vec<JobView>> {
    let mut views = Vec::with_capacity(jobs.len());
    for job in jobs {
        let activity_rows = sqlx::query(VIEW_ACTIVITIES_OF_JOB_SQL)
            .bind(&job.owner_id)
            .bind(job.id.to_string())
            .fetch_all(pool)
            .await?;
        let attempt_rows = sqlx::query(VIEW_ATTEMPTS_OF_JOB_SQL)
            .bind(&job.owner_id)
            .bind(job.id.to_string())
            .fetch_all(pool)
            .await?;
        let attempts: Vec<AttemptRow> = attempt_rows
            .iter()
            .map(attempt_row)
            .collect::<StoreResult<_>>()?;
        let activities = activity_rows
            .iter()
            .map(activity_row)
            .collect::<StoreResult<Vec<_>>>()?;
        views.push(view_of(job, &activities, &attempts));
    }
    Ok(views)
}
