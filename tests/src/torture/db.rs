//! The runner's own reads of the database (the checker's snapshot, the sampler's
//! question), on PostgreSQL or SQLite, every value read as text.

use serde_json::Value;
use sqlx::{PgPool, Row, SqlitePool};
use uuid::Uuid;

/// The database under test.
#[derive(Clone)]
pub enum Db {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// A job as the checker sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: Uuid,
    pub key: String,
    pub input: Value,
    pub status: String,
    pub result: Option<Value>,
}

/// An activity (one per activity job here).
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRow {
    pub id: Uuid,
    pub job_id: Uuid,
    pub status: String,
    pub completed_by: Option<Uuid>,
    pub result: Option<Value>,
}

/// An attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    pub id: Uuid,
    pub activity_id: Uuid,
    pub job_id: Uuid,
    pub status: String,
}

/// What the database holds at the end of a run.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub jobs: Vec<JobRow>,
    pub activities: Vec<ActivityRow>,
    pub attempts: Vec<AttemptRow>,
}

/// Each statement as `(PostgreSQL, SQLite)`: PostgreSQL's uuid and jsonb read as text.
const JOBS: (&str, &str) = (
    "SELECT id::text AS id, idempotency_key, input::text AS input, status, result::text AS result FROM jobs WHERE owner_id = 'alice'",
    "SELECT id, idempotency_key, input, status, result FROM jobs WHERE owner_id = 'alice'",
);
const ACTIVITIES: (&str, &str) = (
    "SELECT id::text AS id, job_id::text AS job_id, status, completed_by::text AS completed_by, result::text AS result FROM activities WHERE owner_id = 'alice'",
    "SELECT id, job_id, status, completed_by, result FROM activities WHERE owner_id = 'alice'",
);
const ATTEMPTS: (&str, &str) = (
    "SELECT id::text AS id, activity_id::text AS activity_id, job_id::text AS job_id, status FROM attempts WHERE owner_id = 'alice'",
    "SELECT id, activity_id, job_id, status FROM attempts WHERE owner_id = 'alice'",
);
const LIVE_DUPLICATES: (&str, &str) = (
    "SELECT activity_id::text AS activity_id, count(*) AS n FROM attempts \
     WHERE status IN ('scheduled', 'started', 'unknown') GROUP BY owner_id, activity_id HAVING count(*) > 1",
    "SELECT activity_id, count(*) AS n FROM attempts \
     WHERE status IN ('scheduled', 'started', 'unknown') GROUP BY owner_id, activity_id HAVING count(*) > 1",
);

impl Db {
    /// Connects to `url` (the runner's own small pool).
    pub async fn connect(url: &str) -> Db {
        if url.starts_with("sqlite:") {
            Db::Sqlite(SqlitePool::connect(url).await.expect("connect to SQLite"))
        } else {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect(url)
                .await
                .expect("connect to PostgreSQL");
            Db::Postgres(pool)
        }
    }

    /// Every row of `sql` (selecting only the named columns), each value as text.
    async fn texts(
        &self,
        sql: (&str, &str),
        columns: &[&str],
    ) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        match self {
            Db::Postgres(pool) => {
                let rows = sqlx::query(sql.0).fetch_all(pool).await?;
                rows.iter()
                    .map(|r| {
                        columns
                            .iter()
                            .map(|c| r.try_get::<Option<String>, _>(*c))
                            .collect()
                    })
                    .collect()
            }
            Db::Sqlite(pool) => {
                let rows = sqlx::query(sql.1).fetch_all(pool).await?;
                rows.iter()
                    .map(|r| {
                        columns
                            .iter()
                            .map(|c| r.try_get::<Option<String>, _>(*c))
                            .collect()
                    })
                    .collect()
            }
        }
    }

    /// The activities that have more than one live attempt right now, with the count.
    pub async fn live_duplicates(&self) -> Result<Vec<(String, i64)>, sqlx::Error> {
        match self {
            Db::Postgres(pool) => {
                let rows = sqlx::query(LIVE_DUPLICATES.0).fetch_all(pool).await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("activity_id")?, r.try_get("n")?)))
                    .collect()
            }
            Db::Sqlite(pool) => {
                let rows = sqlx::query(LIVE_DUPLICATES.1).fetch_all(pool).await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("activity_id")?, r.try_get("n")?)))
                    .collect()
            }
        }
    }

    /// The jobs, activities and attempts of the run's owner.
    pub async fn snapshot(&self) -> Result<Snapshot, sqlx::Error> {
        let id = |v: &Option<String>| v.as_deref().and_then(|s| Uuid::parse_str(s).ok());
        let json = |v: &Option<String>| v.as_deref().and_then(|s| serde_json::from_str(s).ok());
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let jobs = self
            .texts(
                JOBS,
                &["id", "idempotency_key", "input", "status", "result"],
            )
            .await?
            .iter()
            .filter_map(|r| {
                Some(JobRow {
                    id: id(&r[0])?,
                    key: text(&r[1]),
                    input: json(&r[2])?,
                    status: text(&r[3]),
                    result: json(&r[4]),
                })
            })
            .collect();
        let activities = self
            .texts(
                ACTIVITIES,
                &["id", "job_id", "status", "completed_by", "result"],
            )
            .await?
            .iter()
            .filter_map(|r| {
                Some(ActivityRow {
                    id: id(&r[0])?,
                    job_id: id(&r[1])?,
                    status: text(&r[2]),
                    completed_by: id(&r[3]),
                    result: json(&r[4]),
                })
            })
            .collect();
        let attempts = self
            .texts(ATTEMPTS, &["id", "activity_id", "job_id", "status"])
            .await?
            .iter()
            .filter_map(|r| {
                Some(AttemptRow {
                    id: id(&r[0])?,
                    activity_id: id(&r[1])?,
                    job_id: id(&r[2])?,
                    status: text(&r[3]),
                })
            })
            .collect();
        Ok(Snapshot {
            jobs,
            activities,
            attempts,
        })
    }
}

impl Db {
    /// Runs one statement (the run's setup, e.g. a mutant's).
    pub async fn execute(&self, sql: &str) -> Result<(), sqlx::Error> {
        match self {
            Db::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Db::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
        }
    }
}
