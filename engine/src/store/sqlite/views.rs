//! Job views: a job's activities and attempts, read job by job.

use sqlx::sqlite::SqlitePool;
use uuid::Uuid;

use super::decode::*;
use super::queries::*;
use crate::error::StoreError;
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
        let workflow = job.kind == crate::model::JobKind::Workflow;
        let mut view = view_of(job, &activities, &attempts);
        if workflow {
            let children: Vec<String> = sqlx::query_scalar(VIEW_CHILDREN_OF_JOB_SQL)
                .bind(&view.owner)
                .bind(view.id.to_string())
                .fetch_all(pool)
                .await?;
            view.children = children
                .iter()
                .map(|id| {
                    Uuid::parse_str(id).map_err(|e| StoreError::Corrupt(format!("job id: {e}")))
                })
                .collect::<StoreResult<_>>()?;
        }
        views.push(view);
    }
    Ok(views)
}
