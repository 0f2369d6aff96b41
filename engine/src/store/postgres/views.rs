//! Job views: a job's activities and attempts read in two statements for many jobs.

use std::collections::HashMap;

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::decode::*;
use super::queries::*;
use crate::model::{JobKind, JobView};
use crate::store::*;

/// Assembles job views from rows fetched in three queries (on Citus, `citus`, with the
/// statements that read every shard instead of one index probe per key).
pub(super) async fn assemble_views(
    pool: &PgPool,
    jobs: Vec<JobRow>,
    citus: bool,
) -> StoreResult<Vec<JobView>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let owners: Vec<String> = jobs.iter().map(|j| j.owner_id.clone()).collect();
    let ids: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    let (activities_of_jobs, attempts_of_activities) = if citus {
        (
            CITUS_ACTIVITIES_OF_JOBS_SQL,
            CITUS_ATTEMPTS_OF_ACTIVITIES_SQL,
        )
    } else {
        (ACTIVITIES_OF_JOBS_SQL, ATTEMPTS_OF_ACTIVITIES_SQL)
    };
    let activity_rows = sqlx::query(activities_of_jobs)
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
    let attempt_rows = sqlx::query(attempts_of_activities)
        .bind(&activity_owners)
        .bind(&activity_ids)
        .fetch_all(pool)
        .await?;
    let attempts: Vec<AttemptRow> = attempt_rows
        .iter()
        .map(attempt_row)
        .collect::<StoreResult<_>>()?;
    let mut views: Vec<JobView> = jobs
        .into_iter()
        .map(|job| view_of(job, &activities, &attempts))
        .collect();
    add_children(pool, &mut views.iter_mut().collect::<Vec<_>>(), citus).await?;
    Ok(views)
}

/// Fills in the children of the workflow jobs among `views`, by position, in one query
/// (none when there is no workflow job: activity jobs start no children).
pub(super) async fn add_children(
    pool: &PgPool,
    views: &mut [&mut JobView],
    citus: bool,
) -> StoreResult<()> {
    let (owners, ids): (Vec<String>, Vec<Uuid>) = views
        .iter()
        .filter(|v| v.kind == JobKind::Workflow)
        .map(|v| (v.owner.clone(), v.id))
        .unzip();
    if ids.is_empty() {
        return Ok(());
    }
    let statement = if citus {
        CITUS_CHILDREN_OF_JOBS_SQL
    } else {
        CHILDREN_OF_JOBS_SQL
    };
    // (owner, parent, child, key): in position order within each parent.
    let rows: Vec<(String, Uuid, Uuid, String)> = sqlx::query_as(statement)
        .bind(&owners)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    let mut children: HashMap<(String, Uuid), Vec<Uuid>> = HashMap::new();
    for (owner, parent, child, _) in rows {
        children.entry((owner, parent)).or_default().push(child);
    }
    for view in views.iter_mut() {
        if let Some(ids) = children.remove(&(view.owner.clone(), view.id)) {
            view.children = ids;
        }
    }
    Ok(())
}
