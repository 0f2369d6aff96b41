//! `impl Store for PgStore`: the statements that run outside a caller's transaction.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::PgListener;
use sqlx::Row;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::bell::*;
use super::decode::*;
use super::queries::*;
use super::submit::*;
use super::tx::PgTx;
use super::views::*;
use super::{PgStore, MIGRATOR};
use crate::model::{
    Certification, Contract, JobEvent, JobView, ScheduleEvent, Scope, StuckAttempt,
};
use crate::store::*;

#[async_trait]
impl Store for PgStore {
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>> {
        let citus = self.citus().await?.then(|| self.citus.clone());
        Ok(Box::new(PgTx {
            tx: self.pool.begin_with(BEGIN_TRANSACTION_SQL).await?,
            bell: self.bell.clone(),
            wake: false,
            now: None,
            citus,
        }))
    }

    /// Transactions on separate connections run at the same time, each under its own
    /// row locks.
    fn concurrent_writes(&self) -> bool {
        true
    }

    async fn insert_activity_job_now(
        &self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        // One autocommit statement: all of the new job, or (a taken key) nothing.
        let inserted = insert_activity_job_on(&self.pool, job, activity, attempt, events).await?;
        if inserted.is_some() {
            self.bell.ring();
        }
        Ok(inserted)
    }

    async fn insert_activity_jobs_now(
        &self,
        jobs: &[NewActivityJob],
    ) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
        // One autocommit statement: each job all or nothing, keys taken insert nothing.
        // On Citus, one such statement per job (each reaches its owner's shard).
        let answers = if self.citus().await? {
            insert_activity_jobs_one_by_one(&self.pool, jobs).await?
        } else {
            insert_activity_jobs_on(&self.pool, jobs).await?
        };
        if answers.iter().any(Option::is_some) {
            self.bell.ring();
        }
        Ok(answers)
    }

    /// Runs the migrations on a connection of their own, opened with the pool's options
    /// but without its timeouts (later startup options win over earlier ones): a
    /// migration may rewrite a large table, and waits for another engine's migration
    /// lock. The connection is closed afterwards; it never joins the pool.
    async fn migrate(&self) -> StoreResult<()> {
        use sqlx::Connection;
        let options = (*self.pool.connect_options()).clone().options([
            ("statement_timeout", "0"),
            ("idle_in_transaction_session_timeout", "0"),
        ]);
        let mut conn = sqlx::PgConnection::connect_with(&options).await?;
        let migrated = MIGRATOR.run_direct(&mut conn).await;
        conn.close().await.ok();
        Ok(migrated?)
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query(PING_SQL).execute(&self.pool).await?;
        Ok(())
    }

    async fn locate_attempt(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<AttemptLocation>> {
        let row = sqlx::query(LOCATE_ATTEMPT_SQL)
            .bind(attempt_id)
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(AttemptLocation {
                owner_id: r.try_get("owner_id")?,
                job_id: r.try_get("job_id")?,
            })
        })
        .transpose()
    }

    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(JOB_OWNER_SQL)
            .bind(job_id)
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn job_signals(&self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(SIGNALS_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>> {
        let row = sqlx::query(JOB_VIEW_SQL)
            .bind(job_id)
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(
            assemble_views(&self.pool, vec![job_row(&row)?], self.citus().await?)
                .await?
                .pop(),
        )
    }

    async fn open_children_of_cancelled_parents(
        &self,
        limit: i64,
    ) -> StoreResult<Vec<(String, Uuid)>> {
        Ok(sqlx::query_as(OPEN_CHILDREN_OF_CANCELLED_PARENTS_SQL)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn job_views(&self, jobs: &[(String, Uuid)]) -> StoreResult<Vec<JobView>> {
        let (owners, ids): (Vec<String>, Vec<Uuid>) = jobs.iter().cloned().unzip();
        let rows = sqlx::query(JOB_VIEWS_SQL)
            .bind(&owners)
            .bind(&ids)
            .fetch_all(&self.pool)
            .await?;
        let rows = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, rows, self.citus().await?).await
    }

    async fn views_of(&self, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
        assemble_views(&self.pool, jobs, self.citus().await?).await
    }

    async fn replay_now(&self, replays: &[NewReplay]) -> StoreResult<Option<Vec<ReplayedJob>>> {
        if self.citus().await? {
            // The keys may span owners, and so shards: the domain composes the replays
            // from a transaction's single-owner statements.
            return Ok(None);
        }
        let mut keys: Vec<(&str, &str)> = replays
            .iter()
            .map(|r| (r.owner_id.as_str(), r.idempotency_key.as_str()))
            .collect();
        keys.sort();
        keys.dedup();
        let (key_owners, key_names): (Vec<&str>, Vec<&str>) = keys.into_iter().unzip();
        let owners: Vec<&str> = replays.iter().map(|r| r.owner_id.as_str()).collect();
        let names: Vec<&str> = replays.iter().map(|r| r.idempotency_key.as_str()).collect();
        let fingerprints: Vec<&str> = replays.iter().map(|r| r.fingerprint.as_str()).collect();
        let actors: Vec<&str> = replays.iter().map(|r| r.actor.as_str()).collect();
        let data: Vec<&Value> = replays.iter().map(|r| &r.data).collect();
        // One autocommit statement: the jobs locked in (owner, id) order, their replays
        // numbered after their last event (see REPLAY_JOBS_SQL for why that is safe), and
        // their views read with them.
        let rows = sqlx::query(REPLAY_JOBS_SQL)
            .bind(&key_owners)
            .bind(&key_names)
            .bind(&owners)
            .bind(&names)
            .bind(&fingerprints)
            .bind(&actors)
            .bind(&data)
            .fetch_all(&self.pool)
            .await?;
        let mut replayed: Vec<(JobRow, Vec<ActivityRow>, Vec<AttemptRow>)> = Vec::new();
        for row in &rows {
            let job = job_row_in(Cols { row, prefix: "j_" })?;
            if replayed
                .last()
                .is_none_or(|(last, _, _)| (&last.owner_id, last.id) != (&job.owner_id, job.id))
            {
                replayed.push((job, Vec::new(), Vec::new()));
            }
            let Some((_, activities, attempts)) = replayed.last_mut() else {
                continue;
            };
            let activity_id: Option<Uuid> = row.try_get("a_id")?;
            if activity_id.is_some() && activities.last().map(|a| a.id) != activity_id {
                activities.push(activity_row_in(Cols { row, prefix: "a_" })?);
            }
            let attempt_id: Option<Uuid> = row.try_get("id")?;
            if attempt_id.is_some() {
                attempts.push(attempt_row(row)?);
            }
        }
        let mut replayed: Vec<ReplayedJob> = replayed
            .into_iter()
            .map(|(job, activities, attempts)| ReplayedJob {
                view: Some(view_of(job.clone(), &activities, &attempts)),
                job,
            })
            .collect();
        // A workflow job's children, read after the statement (they only ever grow).
        let mut views: Vec<&mut JobView> = replayed
            .iter_mut()
            .filter_map(|r| r.view.as_mut())
            .collect();
        add_children(&self.pool, &mut views, false).await?;
        Ok(Some(replayed))
    }

    async fn job_events(
        &self,
        scope: &Scope,
        job_id: Uuid,
        after_seq: i64,
        limit: Option<i64>,
    ) -> StoreResult<Option<Vec<JobEvent>>> {
        let Some(owner) = self.job_owner(scope, job_id).await? else {
            return Ok(None);
        };
        let rows = sqlx::query(JOB_EVENTS_SQL)
            .bind(&owner)
            .bind(job_id)
            .bind(after_seq)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let events = rows
            .iter()
            .map(|r| {
                Ok(JobEvent {
                    seq: r.try_get("seq")?,
                    at: r.try_get("at")?,
                    kind: r.try_get("type")?,
                    attempt_id: r.try_get("attempt_id")?,
                    actor: r.try_get("actor")?,
                    data: r.try_get("data")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(Some(events))
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>> {
        let rows = sqlx::query(LIST_JOBS_SQL)
            .bind(query.owner.as_deref())
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.workflow.as_deref())
            .bind(query.activity.as_deref())
            .bind(query.before_id)
            .bind(query.limit)
            .bind(query.created_after)
            .bind(query.created_before)
            .fetch_all(&self.pool)
            .await?;
        let jobs = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, jobs, self.citus().await?).await
    }

    async fn list_contracts(&self, owners: Option<&[String]>) -> StoreResult<Vec<ContractRecord>> {
        let rows = sqlx::query(LIST_CONTRACTS_SQL)
            .bind(owners.map(<[String]>::to_vec))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ContractRecord {
                    contract: contract_row(r)?,
                    registered_at: r.try_get("registered_at")?,
                })
            })
            .collect()
    }

    async fn latest_certifications(
        &self,
        owners: Option<&[String]>,
    ) -> StoreResult<Vec<Certification>> {
        let rows = sqlx::query(LATEST_CERTIFICATIONS_SQL)
            .bind(owners.map(<[String]>::to_vec))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(certification_row).collect()
    }

    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>> {
        let rows = sqlx::query(STUCK_ATTEMPTS_SQL)
            .bind(status_words(&query.statuses))
            .bind(query.older_than_s as f64)
            .bind(query.limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let attempt = attempt_row(r)?;
                Ok(StuckAttempt {
                    attempt: attempt.view(),
                    job_id: attempt.job_id,
                    owner: attempt.owner_id.clone(),
                    activity: attempt.activity.clone(),
                    since: r.try_get("since")?,
                })
            })
            .collect()
    }

    async fn live_attempt_counts(&self) -> StoreResult<(Vec<(String, i64)>, i64)> {
        // Served by the partial index of live attempts, whatever the history.
        let rows = sqlx::query(LIVE_ATTEMPTS_BY_STATUS_SQL)
            .fetch_all(&self.pool)
            .await?;
        let live = rows
            .iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let oldest: Option<f64> = sqlx::query_scalar(OLDEST_UNKNOWN_AGE_SQL)
            .fetch_one(&self.pool)
            .await?;
        Ok((live, oldest.unwrap_or(0.0).max(0.0) as i64))
    }

    async fn prune_schedule_events(
        &self,
        retention: std::time::Duration,
        limit: i64,
    ) -> StoreResult<u64> {
        // Read before the transaction takes a connection (a pool may have only one).
        let citus = self.citus().await?;
        let mut tx = self.pool.begin_with(BEGIN_UNTIMED_SQL).await?;
        if citus {
            // Owner by owner, each delete on one shard.
            let owners: Vec<String> = sqlx::query_scalar(CITUS_SCHEDULE_EVENT_OWNERS_SQL)
                .bind(retention.as_secs_f64())
                .fetch_all(&mut *tx)
                .await?;
            let mut deleted = 0u64;
            for owner in self.citus.rotate(owners) {
                let left = limit - i64::try_from(deleted).unwrap_or(i64::MAX);
                if left <= 0 {
                    break;
                }
                deleted += sqlx::query(CITUS_PRUNE_SCHEDULE_EVENTS_SQL)
                    .bind(&owner)
                    .bind(retention.as_secs_f64())
                    .bind(left)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
            return Ok(deleted);
        }
        let deleted = sqlx::query(PRUNE_SCHEDULE_EVENTS_SQL)
            .bind(retention.as_secs_f64())
            .bind(limit)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted.rows_affected())
    }

    async fn prune_finished_jobs(
        &self,
        retention: std::time::Duration,
        limit: i64,
        after: Option<Uuid>,
    ) -> StoreResult<PrunedJobs> {
        // Read before the transaction takes a connection (a pool may have only one).
        let citus = self.citus().await?;
        let mut tx = self.pool.begin_with(BEGIN_UNTIMED_SQL).await?;
        if citus {
            return prune_finished_jobs_by_owner(tx, retention, limit, after).await;
        }
        let doomed: Vec<(String, Uuid)> = sqlx::query_as(LOCK_PRUNABLE_JOBS_SQL)
            .bind(retention.as_secs_f64())
            .bind(limit)
            .bind(after)
            .fetch_all(&mut *tx)
            .await?;
        if doomed.is_empty() {
            return Ok(PrunedJobs::default());
        }
        let (owners, ids): (Vec<String>, Vec<Uuid>) = doomed.into_iter().unzip();
        let pruned: i64 = sqlx::query_scalar(DELETE_PRUNED_JOBS_SQL)
            .bind(&owners)
            .bind(&ids)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PrunedJobs {
            deleted: u64::try_from(pruned).unwrap_or(0),
            chosen: ids.len() as u64,
            last: ids.iter().max().copied(),
        })
    }

    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension> {
        let result = sqlx::query(EXTEND_LEASE_SQL)
            .bind(&location.owner_id)
            .bind(attempt_id)
            .bind(token)
            .bind(details)
            .execute(&self.pool)
            .await?;
        Ok(if result.rows_affected() == 1 {
            LeaseExtension::Extended
        } else {
            LeaseExtension::NotExtended
        })
    }

    async fn extend_leases(&self, renewals: &[LeaseRenewal]) -> StoreResult<Vec<bool>> {
        if self.citus().await? {
            // One renewal at a time, each on its owner's shard.
            let mut extended = Vec::with_capacity(renewals.len());
            for r in renewals {
                let scope = match &r.owner {
                    Some(owner) => Scope::Owner(owner.clone()),
                    None => Scope::AllOwners,
                };
                extended.push(match self.locate_attempt(&scope, r.attempt_id).await? {
                    Some(location) => {
                        self.extend_lease(&location, r.attempt_id, r.token, r.details.as_ref())
                            .await?
                            == LeaseExtension::Extended
                    }
                    None => false,
                });
            }
            return Ok(extended);
        }
        let mut ids = Vec::with_capacity(renewals.len());
        let mut tokens = Vec::with_capacity(renewals.len());
        let mut owners = Vec::with_capacity(renewals.len());
        let mut details = Vec::with_capacity(renewals.len());
        for r in renewals {
            ids.push(r.attempt_id);
            tokens.push(r.token);
            owners.push(r.owner.clone());
            details.push(r.details.clone());
        }
        let rows = sqlx::query(EXTEND_LEASES_SQL)
            .bind(&ids)
            .bind(&tokens)
            .bind(&owners)
            .bind(&details)
            .fetch_all(&self.pool)
            .await?;
        let mut extended = Vec::with_capacity(rows.len());
        for row in rows {
            extended.push((
                row.try_get::<Uuid, _>("id")?,
                row.try_get::<Uuid, _>("lease_token")?,
                row.try_get::<String, _>("owner_id")?,
            ));
        }
        // A renewal counts only with the token and the owner it presented: one with a wrong
        // token, or from another owner's scope, for an attempt another renewal extended was
        // not extended (and must not learn that it exists).
        Ok(renewals
            .iter()
            .map(|r| {
                extended.iter().any(|(id, token, owner)| {
                    *id == r.attempt_id
                        && *token == r.token
                        && r.owner.as_deref().is_none_or(|o| o == owner)
                })
            })
            .collect())
    }

    async fn register_contract(&self, contract: &Contract) -> StoreResult<()> {
        sqlx::query(REGISTER_CONTRACT_SQL)
            .bind(&contract.owner)
            .bind(&contract.activity)
            .bind(&contract.contract_hash)
            .bind(&contract.output_schema)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn insert_certification(&self, c: &NewCertification) -> StoreResult<Certification> {
        let created_at = sqlx::query_scalar(INSERT_CERTIFICATION_SQL)
            .bind(&c.owner)
            .bind(c.id)
            .bind(&c.activity)
            .bind(&c.provider)
            .bind(&c.contract_hash)
            .bind(c.passed)
            .bind(&c.report)
            .fetch_one(&self.pool)
            .await?;
        Ok(Certification {
            id: c.id,
            owner: c.owner.clone(),
            activity: c.activity.clone(),
            provider: c.provider.clone(),
            contract_hash: c.contract_hash.clone(),
            passed: c.passed,
            report: c.report.clone(),
            created_at,
        })
    }

    async fn insert_token(&self, token: &TokenRow) -> StoreResult<()> {
        sqlx::query(INSERT_TOKEN_SQL)
            .bind(&token.owner_id)
            .bind(token.id)
            .bind(token.role.as_str())
            .bind(&token.token_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRow>> {
        let row = sqlx::query(TOKEN_BY_HASH_SQL)
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(token_row).transpose()
    }

    async fn tokens_by_hash(&self, token_hashes: &[String]) -> StoreResult<Vec<TokenRow>> {
        let rows = sqlx::query(TOKENS_BY_HASH_SQL)
            .bind(token_hashes)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(token_row).collect()
    }

    async fn revoke_token(&self, token_id: Uuid) -> StoreResult<bool> {
        let done = sqlx::query(REVOKE_TOKEN_SQL)
            .bind(token_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn schedule(&self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(SCHEDULE_SQL)
            .bind(owner)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn list_schedules(&self, owner: &str) -> StoreResult<Vec<ScheduleRow>> {
        let rows = sqlx::query(LIST_SCHEDULES_SQL)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn schedule_events(
        &self,
        owner: &str,
        name: &str,
        limit: i64,
    ) -> StoreResult<Vec<ScheduleEvent>> {
        let rows = sqlx::query(SCHEDULE_EVENTS_SQL)
            .bind(owner)
            .bind(name)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ScheduleEvent {
                    id: r.try_get("id")?,
                    at: r.try_get("at")?,
                    kind: r.try_get("type")?,
                    tick_at: r.try_get("tick_at")?,
                    job_id: r.try_get("job_id")?,
                    data: r.try_get("data")?,
                })
            })
            .collect()
    }

    async fn next_schedule_fire(&self) -> StoreResult<NextScheduleFire> {
        let row = sqlx::query(NEXT_SCHEDULE_FIRE_SQL)
            .fetch_one(&self.pool)
            .await?;
        Ok(NextScheduleFire {
            at: row.try_get("next_fire_at")?,
            now: row.try_get("now")?,
        })
    }

    /// Relays work notifications (`relay_work`) and, on a multi-host URL, follows the
    /// writable server (`follow_primary`), both until `shutdown`.
    async fn listen_for_work(&self, signal: Arc<Notify>, shutdown: CancellationToken) {
        tokio::join!(
            self.relay_work(signal, shutdown.clone()),
            self.follow_primary(shutdown)
        );
    }
}

impl PgStore {
    /// Relays `NOTIFY onceflow_work` to `signal` until `shutdown`, on a connection of its
    /// own (held for good, one of the pool's). When that connection is lost (a restart of
    /// the server, a dropped session) it marks the loss at once, so that the pool checks
    /// every connection that went idle before it (`Losses`), then connects and
    /// `LISTEN`s again, waiting `LISTEN_RETRY` (500 ms) between tries while the server is away,
    /// and wakes the pollers once it listens: work may have been scheduled while nobody
    /// listened.
    async fn relay_work(&self, signal: Arc<Notify>, shutdown: CancellationToken) {
        if let Ok(mut local) = self.bell.local.lock() {
            local.push(signal.clone());
        }
        let mut lost = false;
        while !shutdown.is_cancelled() {
            let listening = async {
                let mut listener = PgListener::connect_with(&self.pool).await?;
                // A lost connection is answered at once (and marked), not after the
                // server is back.
                listener.eager_reconnect(false);
                listener.listen(WORK_CHANNEL).await?;
                Ok::<_, sqlx::Error>(listener)
            };
            let mut listener = tokio::select! {
                _ = shutdown.cancelled() => return,
                listening = listening => match listening {
                    Ok(listener) => listener,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot LISTEN for work; pollers fall back to re-checking until it can");
                        // On a multi-host URL, this asks for a search of the writable server.
                        self.losses.mark();
                        lost = true;
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(LISTEN_RETRY) => continue,
                        }
                    }
                },
            };
            if lost {
                tracing::info!("LISTEN for work again");
                // Work may have been scheduled while nobody listened.
                signal.notify_waiters();
            }
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    received = listener.try_recv() => match received {
                        Ok(Some(_)) => signal.notify_waiters(),
                        // The server closed the connection (a restart, say).
                        Ok(None) => {
                            tracing::warn!("LISTEN connection lost; reconnecting");
                            self.losses.mark();
                            signal.notify_waiters();
                            lost = true;
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                            self.losses.mark();
                            signal.notify_waiters();
                            lost = true;
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// Retention on Citus: the prunable jobs read from every shard without locking, then
/// locked owner by owner (one shard each, without waiting), then deleted owner by owner
/// in the same transaction, each delete's snapshot taken after every lock is held (as
/// `DELETE_PRUNED_JOBS_SQL` on one server).
async fn prune_finished_jobs_by_owner(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    retention: std::time::Duration,
    limit: i64,
    after: Option<Uuid>,
) -> StoreResult<PrunedJobs> {
    let candidates: Vec<(String, Uuid)> = sqlx::query_as(CITUS_PRUNABLE_JOBS_SQL)
        .bind(retention.as_secs_f64())
        .bind(limit)
        .bind(after)
        .fetch_all(&mut *tx)
        .await?;
    if candidates.is_empty() {
        return Ok(PrunedJobs::default());
    }
    let mut by_owner: std::collections::BTreeMap<&str, Vec<Uuid>> = Default::default();
    for (owner, id) in &candidates {
        by_owner.entry(owner.as_str()).or_default().push(*id);
    }
    let mut locked = Vec::with_capacity(by_owner.len());
    for (owner, ids) in by_owner {
        let held: Vec<Uuid> = sqlx::query_scalar(CITUS_LOCK_JOBS_SQL)
            .bind(owner)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
        if !held.is_empty() {
            locked.push((owner, held));
        }
    }
    let mut deleted = 0i64;
    for (owner, ids) in locked {
        let pruned: i64 = sqlx::query_scalar(CITUS_DELETE_PRUNED_JOBS_SQL)
            .bind(owner)
            .bind(&ids)
            .fetch_one(&mut *tx)
            .await?;
        deleted += pruned;
    }
    tx.commit().await?;
    Ok(PrunedJobs {
        deleted: u64::try_from(deleted).unwrap_or(0),
        chosen: candidates.len() as u64,
        last: candidates.iter().map(|(_, id)| *id).max(),
    })
}
