//! The PostgreSQL statements, one `.sql` file each under `sql/`: the same file name in
//! `store/sqlite/sql/` is the same statement in SQLite's dialect. The hot statements are
//! public so that a test (`tests/plans.rs`) can EXPLAIN them against a large history.
//!
//! ARRAY_LOOKUPS: the statements that look rows up by arrays of keys do it the same way.
//!
//! - One index probe per key, in a lateral subquery fenced by `OFFSET 0`: it cannot be
//!   turned into a hash join over a scan of the table, so a plan made while the table was
//!   small (and cached by PostgreSQL) stays right as the table grows.
//! - Lookups by a key other than the primary key (jobs by idempotency key, activities by
//!   job, attempts by activity) go through an index not led by `owner_id`, with the owner
//!   as a filter written so that it cannot become an index condition: while the tables
//!   are tiny, a probe of the primary key by the owner alone costs the same (one row
//!   estimated), and the older index wins the tie and is cached, reading every row of the
//!   owner per key once the tables are large.
//! - The keys are walked with `generate_subscripts`, whose row estimate does not depend on
//!   the array's length (`unnest`'s does): the plan for one call costs the same as the
//!   cached generic plan, so PostgreSQL settles on that plan after a few calls instead of
//!   planning again on every call (planning cost more than running them).
//!
//! `tests/plans.rs` checks both on small and large tables.

/// How a transaction begins that must not be cut by `statement_timeout`: retention's
/// batches, which are bounded (at most `PRUNE_BATCH` jobs) and paced, but whose scan for
/// prunable jobs may be long over a large history of unfinished ones, and which would
/// otherwise fail at the same place every pass and never progress.
/// `idle_in_transaction_session_timeout` still ends one whose engine stalled.
pub const BEGIN_UNTIMED_SQL: &str = include_str!("sql/begin_untimed.sql");

/// Retention, first statement: locks up to `$2` jobs finished more than `$1` seconds ago
/// (database clock), with ids above `$3` if given. Job ids are UUIDv7, so "created before the cutoff" is an id range:
/// the scan walks `jobs_id_unique` from the oldest job and stops at the cutoff, whatever
/// the history.
pub const LOCK_PRUNABLE_JOBS_SQL: &str = include_str!("sql/lock_prunable_jobs.sql");

/// Retention, second statement, in the same transaction once the jobs are locked: deletes
/// each with its activities, attempts, events and timers. It runs apart from the lock so
/// that its snapshot is taken after the locks are held: rows a transaction added to a job
/// just before this one locked it (a replay's event) are seen and deleted with it, never
/// left behind; every writer of a job's rows holds the job's row lock or creates the job.
pub const DELETE_PRUNED_JOBS_SQL: &str = include_str!("sql/delete_pruned_jobs.sql");

/// How every engine transaction begins (one round trip, as a plain `BEGIN`). Each of its
/// statements reaches rows by index probes, index ranges or the ctids of rows it locked
/// (tests/plans.rs), so the planner is told not to scan tables and not to hash- or
/// merge-join them: PostgreSQL keeps a connection's cached plan for as long as the
/// connection lives, and a plan cached while the tables were tiny (a fresh database, or a
/// server whose autovacuum never analyzes them) would otherwise keep scanning them as they
/// grow. Seen: the batched win's cached plan scanned every activity on every worker cycle.
pub const BEGIN_TRANSACTION_SQL: &str = include_str!("sql/begin_transaction.sql");

/// Dispatch: hands out scheduled attempts (`$1` queue, `$2` owner or NULL, `$3`/`$4` activity and provider arrays, `$5` limit, `$6` worker).
pub const CLAIM_ATTEMPTS_SQL: &str = include_str!("sql/claim_attempts.sql");

/// Dispatch of workflow tasks (`$1` queue, `$2` workflows, `$3` owner or NULL, `$4` limit, `$5` worker, `$6` lease seconds).
pub const CLAIM_WORKFLOW_TASKS_SQL: &str = include_str!("sql/claim_workflow_tasks.sql");

/// The winning commits of a batch of results of distinct activity jobs, each with the
/// guards of `commit_activity_job_result`: `$1`–`$7` one element per result (owner, job,
/// job version, activity, read version, attempt, result), `$8` the attempt statuses a
/// win may leave. Answers `ord` (1-based position), `activity_won`, `job_won` per result.
pub const COMMIT_ACTIVITY_JOB_RESULTS_SQL: &str =
    include_str!("sql/commit_activity_job_results.sql");

/// Completions in a batch: locks the jobs of the attempts `$1` (distinct ids) in
/// (owner, id) order, each job once. Each id is looked up by index, one at a time (see
/// ARRAY_LOOKUPS), whatever the tables' size or statistics when the plan was cached.
pub const LOCK_JOBS_OF_ATTEMPTS_SQL: &str = include_str!("sql/lock_jobs_of_attempts.sql");

/// The heartbeat fast path, batched: extends the leases of attempts `$1[i]` held by tokens
/// `$2[i]`, each within owner `$3[i]` (NULL: any), keeping details `$4[i]` (NULL: the last
/// ones); answers the extended attempts with their tokens and owners. One index probe per
/// attempt (see ARRAY_LOOKUPS); each row updated is reached by the ctid it locked; an
/// attempt another transaction holds is skipped, never waited for.
pub const EXTEND_LEASES_SQL: &str = include_str!("sql/extend_leases.sql");

/// Views: the activities of the jobs (owner `$1[i]`, job `$2[i]`), by job and position;
/// one index probe per job (see ARRAY_LOOKUPS).
pub const ACTIVITIES_OF_JOBS_SQL: &str = include_str!("sql/activities_of_jobs.sql");

/// Views: the attempts of the activities (owner `$1[i]`, activity `$2[i]`), by activity
/// and number; one index probe per activity, as [`ACTIVITIES_OF_JOBS_SQL`].
pub const ATTEMPTS_OF_ACTIVITIES_SQL: &str = include_str!("sql/attempts_of_activities.sql");

/// Replays in one statement: the jobs holding the keys (owner `$1[i]`, key `$2[i]`)
/// locked in (owner, id) order, and a `job_replayed` for each replay (owner `$3[i]`, key
/// `$4[i]`, fingerprint `$5[i]`, actor `$6[i]`, data `$7[i]`) whose fingerprint is its
/// job's; answers the jobs as locked.
pub const REPLAY_JOBS_SQL: &str = include_str!("sql/replay_jobs.sql");

/// The timer loop (`$1` limit).
pub const LOCK_DUE_TIMERS_SQL: &str = include_str!("sql/lock_due_timers.sql");

/// The lease reaper (`$1` limit).
pub const LOCK_EXPIRED_LEASES_SQL: &str = include_str!("sql/lock_expired_leases.sql");

/// Schedule-to-start expiry (`$1` limit).
pub const LOCK_OVERDUE_SCHEDULED_SQL: &str = include_str!("sql/lock_overdue_scheduled.sql");

/// The submission of an activity job in one statement: job (dedup insert), activity 0,
/// attempt 1 and the job's first events, each inserted only from the row before it.
pub const INSERT_ACTIVITY_JOB_SQL: &str = include_str!("sql/insert_activity_job.sql");

/// Many submissions of activity jobs in one statement: [`INSERT_ACTIVITY_JOB_SQL`] over
/// arrays, one element per job (`$1`–`$17`), and the events of every job (`$18`–`$23`).
pub const INSERT_ACTIVITY_JOBS_SQL: &str = include_str!("sql/insert_activity_jobs.sql");

/// The work bell: tells every engine LISTENing on channel `$1` that attempts became available.
pub(super) const SEND_NOTIFICATIONS_SQL: &str = include_str!("sql/send_notifications.sql");

/// Sessions in pg_stat_activity include background workers, which take no client slot.
pub(super) const CONNECTION_ROOM_SQL: &str = include_str!("sql/connection_room.sql");

/// Whether the server takes writes: not a standby in recovery, not read-only by default
/// (failover: the engine connects only to such a server when the URL lists several).
pub(super) const SERVER_IS_WRITABLE_SQL: &str = include_str!("sql/server_is_writable.sql");

/// Answers when the database answers.
pub(super) const PING_SQL: &str = include_str!("sql/ping.sql");

/// Finds the owner and job of an attempt visible in `scope`.
pub(super) const LOCATE_ATTEMPT_SQL: &str = include_str!("sql/locate_attempt.sql");

/// The owner of a job visible in `scope`.
pub(super) const JOB_OWNER_SQL: &str = include_str!("sql/job_owner.sql");

/// A job visible in `scope`, with its activities and attempts.
pub(super) const JOB_VIEW_SQL: &str = include_str!("sql/job_view.sql");

/// The jobs `(owner, id)` with their activities and attempts, in any order; jobs that do not
pub(super) const JOB_VIEWS_SQL: &str = include_str!("sql/job_views.sql");

/// A job's events in order, those numbered above `after_seq`, at most `limit` of them (all when
pub(super) const JOB_EVENTS_SQL: &str = include_str!("sql/job_events.sql");

/// Jobs matching the query, newest first, with their activities and attempts.
pub(super) const LIST_JOBS_SQL: &str = include_str!("sql/list_jobs.sql");

/// The output contracts of these owners (of every owner when `None`).
pub(super) const LIST_CONTRACTS_SQL: &str = include_str!("sql/list_contracts.sql");

/// The latest certification of each (owner, activity, contract hash, provider) of these owners
pub(super) const LATEST_CERTIFICATIONS_SQL: &str = include_str!("sql/latest_certifications.sql");

/// Attempts in the given statuses for longer than the given age, oldest first.
pub(super) const STUCK_ATTEMPTS_SQL: &str = include_str!("sql/stuck_attempts.sql");

/// Live attempts by status, and the age in seconds of the oldest `unknown` one (0 when none),
pub(super) const LIVE_ATTEMPTS_BY_STATUS_SQL: &str =
    include_str!("sql/live_attempts_by_status.sql");

/// Live attempts by status, and the age in seconds of the oldest `unknown` one (0 when none),
pub(super) const OLDEST_UNKNOWN_AGE_SQL: &str = include_str!("sql/oldest_unknown_age.sql");

/// Retention of schedules' history: deletes at most `limit` schedule events written more than
pub(super) const PRUNE_SCHEDULE_EVENTS_SQL: &str = include_str!("sql/prune_schedule_events.sql");

/// The heartbeat fast path: extends the lease of a `started` attempt held by `token` in one
pub(super) const EXTEND_LEASE_SQL: &str = include_str!("sql/extend_lease.sql");

/// Registers (or confirms, making it current again) an output contract.
pub(super) const REGISTER_CONTRACT_SQL: &str = include_str!("sql/register_contract.sql");

/// Records a certification run, stamped with the database's clock when it is written (never an
pub(super) const INSERT_CERTIFICATION_SQL: &str = include_str!("sql/insert_certification.sql");

/// Stores a new token (its hash).
pub(super) const INSERT_TOKEN_SQL: &str = include_str!("sql/insert_token.sql");

/// The unrevoked token with this hash.
pub(super) const TOKEN_BY_HASH_SQL: &str = include_str!("sql/token_by_hash.sql");

/// The unrevoked tokens with any of these hashes (in any order; a hash that no unrevoked token
pub(super) const TOKENS_BY_HASH_SQL: &str = include_str!("sql/tokens_by_hash.sql");

/// Revokes a token; `false` when no unrevoked token has this id.
pub(super) const REVOKE_TOKEN_SQL: &str = include_str!("sql/revoke_token.sql");

/// A schedule of `owner`.
pub(super) const SCHEDULE_SQL: &str = include_str!("sql/schedule.sql");

/// The schedules of `owner`, by name.
pub(super) const LIST_SCHEDULES_SQL: &str = include_str!("sql/list_schedules.sql");

/// The latest `limit` events of a schedule, oldest first.
pub(super) const SCHEDULE_EVENTS_SQL: &str = include_str!("sql/schedule_events.sql");

/// When the earliest unpaused schedule of any owner is due next, with the database's clock, so
pub(super) const NEXT_SCHEDULE_FIRE_SQL: &str = include_str!("sql/next_schedule_fire.sql");

/// The transaction's clock: the database's time when the transaction began (PostgreSQL's
pub(super) const NOW_SQL: &str = include_str!("sql/now.sql");

/// Inserts a job unless `(owner, idempotency key)` exists (invariant 1). Returns the inserted
pub(super) const INSERT_JOB_SQL: &str = include_str!("sql/insert_job.sql");

/// The job holding an idempotency key.
pub(super) const JOB_BY_IDEMPOTENCY_KEY_SQL: &str = include_str!("sql/job_by_idempotency_key.sql");

/// Locks the job of an attempt visible in `scope` and returns it (one round trip for what
pub(super) const LOCK_JOB_OF_ATTEMPT_SQL: &str = include_str!("sql/lock_job_of_attempt.sql");

/// Locks a job row for this transaction and returns it.
pub(super) const LOCK_JOB_SQL: &str = include_str!("sql/lock_job.sql");

/// Marks a queued job running.
pub(super) const MARK_JOB_RUNNING_SQL: &str = include_str!("sql/mark_job_running.sql");

/// Job CAS: takes the job's result slot if `version` is current and nobody took it.
pub(super) const COMMIT_JOB_RESULT_SQL: &str = include_str!("sql/commit_job_result.sql");

/// Closes an open job (`failed` or `cancelled`) if `version` is current.
pub(super) const CLOSE_JOB_SQL: &str = include_str!("sql/close_job.sql");

/// Resumes a failed job or a parked workflow at the version read (the resume guard).
pub(super) const RESUME_JOB_SQL: &str = include_str!("sql/resume_job.sql");

/// Reopens a closed activity nobody won, for a resume, with a fresh retry budget.
pub(super) const REOPEN_ACTIVITY_SQL: &str = include_str!("sql/reopen_activity.sql");

/// The attempt number after which an activity's retry budget counts.
pub(super) const ACTIVITY_RESUMED_AFTER_SQL: &str = include_str!("sql/activity_resumed_after.sql");

/// Inserts an activity.
pub(super) const INSERT_ACTIVITY_SQL: &str = include_str!("sql/insert_activity.sql");

/// An activity by id.
pub(super) const ACTIVITY_SQL: &str = include_str!("sql/activity.sql");

/// An activity by its position in the job.
pub(super) const ACTIVITY_BY_SEQ_SQL: &str = include_str!("sql/activity_by_seq.sql");

/// A job's activities in order.
pub(super) const ACTIVITIES_OF_JOB_SQL: &str = include_str!("sql/activities_of_job.sql");

/// Moves an activity between open statuses when it is in one of `from`.
pub(super) const SET_ACTIVITY_STATUS_SQL: &str = include_str!("sql/set_activity_status.sql");

/// Activity CAS (invariant 4): takes the result slot for `attempt_id` if the activity's version
pub(super) const COMMIT_ACTIVITY_RESULT_SQL: &str = include_str!("sql/commit_activity_result.sql");

/// The commit of a winning result of an activity job's attempt, in one step: the activity CAS
pub(super) const COMMIT_ACTIVITY_JOB_RESULT_SQL: &str =
    include_str!("sql/commit_activity_job_result.sql");

/// Closes an open activity (`failed` or `cancelled`), moving its version so that no later
pub(super) const CLOSE_ACTIVITY_SQL: &str = include_str!("sql/close_activity.sql");

/// Inserts an attempt unless the activity already has a live one (invariant 2) or the number is
pub(super) const INSERT_ATTEMPT_SQL: &str = include_str!("sql/insert_attempt.sql");

/// An attempt by id.
pub(super) const ATTEMPT_SQL: &str = include_str!("sql/attempt.sql");

/// An activity's attempts in number order.
pub(super) const ATTEMPTS_OF_ACTIVITY_SQL: &str = include_str!("sql/attempts_of_activity.sql");

/// Ends an attempt that is in one of `from`, recording its error and what its completion
pub(super) const FINISH_ATTEMPT_SQL: &str = include_str!("sql/finish_attempt.sql");

/// `started` with an expired lease → `unknown` (invariant 3).
pub(super) const MARK_ATTEMPT_UNKNOWN_SQL: &str = include_str!("sql/mark_attempt_unknown.sql");

/// `unknown` → `started` with a fresh lease, for the holder of its lease token.
pub(super) const REVIVE_ATTEMPT_SQL: &str = include_str!("sql/revive_attempt.sql");

/// Every live attempt of an activity but `except` → `cancelled`, with who and why; returns each
pub(super) const CANCEL_LIVE_ATTEMPTS_SQL: &str = include_str!("sql/cancel_live_attempts.sql");

/// A live attempt → `cancelled`, with who and why.
pub(super) const CANCEL_ATTEMPT_SQL: &str = include_str!("sql/cancel_attempt.sql");

/// Appends events to job histories, in order.
pub(super) const APPEND_EVENTS_SQL: &str = include_str!("sql/append_events.sql");

/// The current output contract of an activity for an owner (its own, else `*`'s).
pub(super) const CURRENT_CONTRACT_SQL: &str = include_str!("sql/current_contract.sql");

/// The latest certification of a provider for a contract hash (the owner's own, else `*`'s).
pub(super) const LATEST_CERTIFICATION_SQL: &str = include_str!("sql/latest_certification.sql");

/// Workflow-task CAS: ends the task held by `token` if the job's version is still
pub(super) const COMPLETE_WORKFLOW_TASK_SQL: &str = include_str!("sql/complete_workflow_task.sql");

/// Marks a workflow job ready for its next task and wakes pollers.
pub(super) const MARK_WORKFLOW_READY_SQL: &str = include_str!("sql/mark_workflow_ready.sql");

/// Parks a workflow job with a visible error: no more workflow tasks.
pub(super) const PARK_WORKFLOW_SQL: &str = include_str!("sql/park_workflow.sql");

/// Starts a timer at a position unless one is there; `false` when it was.
pub(super) const INSERT_TIMER_SQL: &str = include_str!("sql/insert_timer.sql");

/// Records when (in the job's arrival order) an activity's outcome arrived.
pub(super) const RECORD_ACTIVITY_ARRIVAL_SQL: &str =
    include_str!("sql/record_activity_arrival.sql");

/// Records when (in the job's arrival order) a timer fired.
pub(super) const RECORD_TIMER_ARRIVAL_SQL: &str = include_str!("sql/record_timer_arrival.sql");

/// Records when (in its parent's arrival order) a child job's outcome arrived.
pub(super) const RECORD_CHILD_ARRIVAL_SQL: &str = include_str!("sql/record_child_arrival.sql");

/// A workflow job's children by position, with their arrival numbers (the journal, the
/// cancel cascade).
pub(super) const CHILDREN_OF_JOB_SQL: &str = include_str!("sql/children_of_job.sql");

/// Views: the children of the jobs (owner `$1[i]`, parent `$2[i]`), by parent and
/// position; one index probe per parent (see ARRAY_LOOKUPS).
pub(super) const CHILDREN_OF_JOBS_SQL: &str = include_str!("sql/children_of_jobs.sql");

/// Reaper: open children whose parent was cancelled (a crash between a parent's cancel
/// and its cascade).
pub(super) const OPEN_CHILDREN_OF_CANCELLED_PARENTS_SQL: &str =
    include_str!("sql/open_children_of_cancelled_parents.sql");

/// Records the compensation bound a workflow declared, under its workflow task's CAS.
pub(super) const DECLARE_COMPENSATION_SQL: &str = include_str!("sql/declare_compensation.sql");

/// The owner cancels a workflow job that declared a compensation bound.
pub(super) const REQUEST_WORKFLOW_CANCEL_SQL: &str =
    include_str!("sql/request_workflow_cancel.sql");

/// Records when (in the job's arrival order) the owner's cancel arrived.
pub(super) const RECORD_CANCEL_ARRIVAL_SQL: &str = include_str!("sql/record_cancel_arrival.sql");

/// A cancelled workflow returned: the job ends `cancelled`.
pub(super) const END_COMPENSATION_SQL: &str = include_str!("sql/end_compensation.sql");

/// A cancelled workflow's compensation bound passed: the job ends `cancelled`.
pub(super) const CLOSE_OVERDUE_COMPENSATION_SQL: &str =
    include_str!("sql/close_overdue_compensation.sql");

/// The compensation deadlines' loop: jobs whose compensation bound passed, locked
/// without waiting.
pub const LOCK_DUE_COMPENSATIONS_SQL: &str = include_str!("sql/lock_due_compensations.sql");

/// Citus: the owners with jobs whose compensation bound passed, read without locking.
pub(super) const CITUS_DUE_COMPENSATION_OWNERS_SQL: &str =
    include_str!("sql/citus_due_compensation_owners.sql");

/// lock_due_compensations.sql for one owner (`$1`; Citus: one shard), `$2` limit.
pub(super) const CITUS_LOCK_DUE_COMPENSATIONS_SQL: &str =
    include_str!("sql/citus_lock_due_compensations.sql");

/// Records a signal as its job's next unless its key was used (invariant 9).
pub(super) const INSERT_SIGNAL_SQL: &str = include_str!("sql/insert_signal.sql");

/// The signal a job holds under an idempotency key.
pub(super) const SIGNAL_BY_KEY_SQL: &str = include_str!("sql/signal_by_key.sql");

/// Records a workflow job's patch marker; `false` when the job had recorded it already.
pub(super) const INSERT_PATCH_SQL: &str = include_str!("sql/insert_patch.sql");

/// The patch markers a workflow job recorded, by patch id.
pub(super) const PATCHES_OF_JOB_SQL: &str = include_str!("sql/patches_of_job.sql");

/// A job's signals in the order they were recorded.
pub(super) const SIGNALS_OF_JOB_SQL: &str = include_str!("sql/signals_of_job.sql");

/// Hands a signal to the wait at a workflow position, once.
pub(super) const CONSUME_SIGNAL_SQL: &str = include_str!("sql/consume_signal.sql");

/// Records when (in the job's arrival order) a signal arrived.
pub(super) const RECORD_SIGNAL_ARRIVAL_SQL: &str = include_str!("sql/record_signal_arrival.sql");

/// Fires a due timer once.
pub(super) const FIRE_TIMER_SQL: &str = include_str!("sql/fire_timer.sql");

/// Locks a schedule of `owner` for this transaction and returns it.
pub(super) const LOCK_SCHEDULE_SQL: &str = include_str!("sql/lock_schedule.sql");

/// Inserts a schedule unless `(owner, name)` exists; `false` when it did.
pub(super) const INSERT_SCHEDULE_SQL: &str = include_str!("sql/insert_schedule.sql");

/// Writes every changeable field of `schedule` if its stored version is still
pub(super) const UPDATE_SCHEDULE_SQL: &str = include_str!("sql/update_schedule.sql");

/// Deletes a schedule and its events; `false` when there was none.
pub(super) const DELETE_SCHEDULE_SQL: &str = include_str!("sql/delete_schedule.sql");

/// Locks (without waiting) up to `limit` unpaused schedules due by the transaction's clock
pub(super) const LOCK_DUE_SCHEDULES_SQL: &str = include_str!("sql/lock_due_schedules.sql");

/// The status of a job of `owner`, without locking it.
pub(super) const JOB_STATUS_SQL: &str = include_str!("sql/job_status.sql");

/// Appends events to schedule histories, in order.
pub(super) const APPEND_SCHEDULE_EVENTS_SQL: &str = include_str!("sql/append_schedule_events.sql");

// Citus (`onceflow migrate --citus`; the `citus_*` statements run instead of others when
// the database runs Citus: each reaches one shard, see `PgStore::citus`).

/// activities_of_jobs.sql on Citus: the activities of the jobs (owner `$1[i]`, job
/// `$2[i]`), by job and position.
/// children_of_jobs.sql on Citus: the children of the jobs (owner `$1[i]`, parent
/// `$2[i]`), by parent and position.
pub(super) const CITUS_CHILDREN_OF_JOBS_SQL: &str = include_str!("sql/citus_children_of_jobs.sql");

pub(super) const CITUS_ACTIVITIES_OF_JOBS_SQL: &str =
    include_str!("sql/citus_activities_of_jobs.sql");

/// append_events.sql for the events of one owner (`$1`; Citus: one shard): jobs `$2[i]`,
/// types `$3[i]`, attempts `$4[i]`, actors `$5[i]`, data `$6[i]`.
/// Event order: the caller holds each job's lock, so numbering after the current
/// maximum is safe.
pub(super) const CITUS_APPEND_EVENTS_SQL: &str = include_str!("sql/citus_append_events.sql");

/// attempts_of_activities.sql on Citus: the attempts of the activities (owner `$1[i]`,
/// activity `$2[i]`), by activity and number.
pub(super) const CITUS_ATTEMPTS_OF_ACTIVITIES_SQL: &str =
    include_str!("sql/citus_attempts_of_activities.sql");

/// claim_attempts.sql for one owner (Citus: one shard): `$1` queue, `$2` owner, `$3`/`$4`
/// activity and provider arrays, `$5` limit, `$6` worker, `$7` one fresh lease token per
/// attempt it may hand out (Citus refuses a volatile function in an UPDATE).
/// Every row is reached by an index range or probe, or by the ctid of a row this
/// statement locked, whatever the tables' size when the plan was cached (see
/// ARRAY_LOOKUPS): PostgreSQL keeps one plan for it.
pub(super) const CITUS_CLAIM_ATTEMPTS_SQL: &str = include_str!("sql/citus_claim_attempts.sql");

/// claim_workflow_tasks.sql for one owner (Citus: one shard): `$1` queue, `$2` workflows,
/// `$3` owner, `$4` limit, `$5` worker, `$6` lease seconds, `$7` one fresh lease token per
/// task it may hand out (Citus refuses a volatile function in an UPDATE).
pub(super) const CITUS_CLAIM_WORKFLOW_TASKS_SQL: &str =
    include_str!("sql/citus_claim_workflow_tasks.sql");

/// delete_pruned_jobs.sql for the jobs `$2` of one owner (`$1`; Citus: one shard), in the
/// same transaction once they are locked (citus_lock_jobs.sql).
pub(super) const CITUS_DELETE_PRUNED_JOBS_SQL: &str =
    include_str!("sql/citus_delete_pruned_jobs.sql");

/// Citus: the owners with attempts available now on queue `$1` for the (activity,
/// provider) pairs `$2[i]`/`$3[i]`, read without locking (a claim then takes them owner
/// by owner, one shard each).
pub(super) const CITUS_DISPATCH_OWNERS_SQL: &str = include_str!("sql/citus_dispatch_owners.sql");

/// Citus: the owners with unpaused schedules due now, read without locking (the scheduler
/// then locks them owner by owner, one shard each).
pub(super) const CITUS_DUE_SCHEDULE_OWNERS_SQL: &str =
    include_str!("sql/citus_due_schedule_owners.sql");

/// Citus: the owners with due, unfired timers, read without locking (the timer loop then
/// locks them owner by owner, one shard each).
pub(super) const CITUS_DUE_TIMER_OWNERS_SQL: &str = include_str!("sql/citus_due_timer_owners.sql");

/// Citus: the owners with started attempts whose lease expired, read without locking (the
/// reaper then locks them owner by owner, one shard each).
pub(super) const CITUS_EXPIRED_LEASE_OWNERS_SQL: &str =
    include_str!("sql/citus_expired_lease_owners.sql");

/// lock_due_schedules.sql for one owner (`$1`; Citus: one shard), `$2` limit.
/// Scheduler loop: each due schedule is taken by one engine only (SKIP LOCKED), and
/// only once due by the database's clock (the transaction's now(), which the pass
/// computes its ticks from), whatever the engine's clock.
pub(super) const CITUS_LOCK_DUE_SCHEDULES_SQL: &str =
    include_str!("sql/citus_lock_due_schedules.sql");

/// lock_due_timers.sql for one owner (`$1`; Citus: one shard), `$2` limit.
pub(super) const CITUS_LOCK_DUE_TIMERS_SQL: &str = include_str!("sql/citus_lock_due_timers.sql");

/// lock_expired_leases.sql for one owner (`$1`; Citus: one shard), `$2` limit.
pub(super) const CITUS_LOCK_EXPIRED_LEASES_SQL: &str =
    include_str!("sql/citus_lock_expired_leases.sql");

/// Retention on Citus: locks the jobs `$2` of owner `$1` (one shard) that are still
/// finished, in id order, without waiting.
/// A job another transaction holds (a replay, an operator) waits for a later pass.
pub(super) const CITUS_LOCK_JOBS_SQL: &str = include_str!("sql/citus_lock_jobs.sql");

/// lock_overdue_scheduled.sql for one owner (`$1`; Citus: one shard), `$2` limit.
pub(super) const CITUS_LOCK_OVERDUE_SCHEDULED_SQL: &str =
    include_str!("sql/citus_lock_overdue_scheduled.sql");

/// Whether the database runs Citus (the extension is installed in it): the store then
/// takes the statements that reach one shard each (the `citus_*` files), owner by owner.
pub(super) const CITUS_MODE_SQL: &str = include_str!("sql/citus_mode.sql");

/// Citus: the owner and job of each of the attempts `$1` (of any owner), read from every
/// shard in one statement without locking (completions then lock each job on its
/// owner's shard).
pub(super) const CITUS_LOCATE_ATTEMPTS_SQL: &str = include_str!("sql/citus_locate_attempts.sql");

/// Citus: the owners with scheduled attempts past their schedule-to-start deadline, read
/// without locking (the reaper then locks them owner by owner, one shard each).
pub(super) const CITUS_OVERDUE_SCHEDULED_OWNERS_SQL: &str =
    include_str!("sql/citus_overdue_scheduled_owners.sql");

/// Retention on Citus, first statement: lock_prunable_jobs.sql without the lock (it reads
/// every shard): up to `$2` jobs finished more than `$1` seconds ago (database clock),
/// with ids above `$3` if given, oldest first; citus_lock_jobs.sql then locks them owner
/// by owner.
pub(super) const CITUS_PRUNABLE_JOBS_SQL: &str = include_str!("sql/citus_prunable_jobs.sql");

/// prune_schedule_events.sql for one owner (`$1`; Citus: one shard): deletes at most `$3`
/// of its schedule events older than `$2` seconds, oldest first; answers how many.
/// Retention: only events older than the retention, oldest first.
pub(super) const CITUS_PRUNE_SCHEDULE_EVENTS_SQL: &str =
    include_str!("sql/citus_prune_schedule_events.sql");

/// Citus: the owners with schedule events older than `$1` seconds (database clock), read
/// without locking (retention then deletes them owner by owner, one shard each).
pub(super) const CITUS_SCHEDULE_EVENT_OWNERS_SQL: &str =
    include_str!("sql/citus_schedule_event_owners.sql");

/// Citus: the owners with workflow tasks to hand out on queue `$1` for the workflows `$2`,
/// read without locking (a claim then takes them owner by owner, one shard each).
pub(super) const CITUS_WORKFLOW_OWNERS_SQL: &str = include_str!("sql/citus_workflow_owners.sql");

/// `onceflow migrate --citus`: distributes the schema on Citus. Idempotent: a table
/// already distributed (or a reference table) is left as it is, so it may run after every
/// migration, and a table a later migration adds is distributed the same way.
/// - api_tokens, contracts and certifications become reference tables (a copy on every
///   node): tokens are looked up by hash alone, and contracts and certifications are
///   read for an owner together with the platform's (`*`) rows.
/// - jobs is distributed by owner_id; every other table with an owner_id column is
///   distributed by it, colocated with jobs (an owner's rows share one shard), each once
///   the tables its foreign keys reference are.
pub(super) const DISTRIBUTE_TABLES_SQL: &str = include_str!("sql/distribute_tables.sql");

/// `onceflow migrate --citus --shard-count N`: how many shards the tables distributed
/// next are split into (this session only; Citus's default when not set).
pub(super) const SET_SHARD_COUNT_SQL: &str = include_str!("sql/set_shard_count.sql");

/// The tables of the schema that Citus holds neither as distributed nor as reference
/// tables (sqlx's migration ledger, which only the coordinator reads, aside): after
/// `onceflow migrate --citus` there are none.
pub(super) const UNDISTRIBUTED_TABLES_SQL: &str = include_str!("sql/undistributed_tables.sql");

/// A workflow job's current run (continue-as-new), never sticky.
pub(super) const WORKFLOW_RUN_SQL: &str = include_str!("sql/workflow_run.sql");

/// The activities of a workflow job's run, with their arrival numbers.
pub(super) const JOURNAL_ACTIVITIES_SQL: &str = include_str!("sql/journal_activities.sql");

/// The activities of a workflow job's run whose outcome arrived after a place in the order.
pub(super) const ACTIVITIES_ARRIVED_SINCE_SQL: &str =
    include_str!("sql/activities_arrived_since.sql");

/// A job's activities at some positions, with their arrival numbers.
pub(super) const ACTIVITIES_AT_SQL: &str = include_str!("sql/activities_at.sql");

/// The timers of a workflow job's run by position.
pub(super) const JOURNAL_TIMERS_SQL: &str = include_str!("sql/journal_timers.sql");

/// The timers of a workflow job's run that fired after a place in the order.
pub(super) const TIMERS_ARRIVED_SINCE_SQL: &str = include_str!("sql/timers_arrived_since.sql");

/// A job's timers at some positions.
pub(super) const TIMERS_AT_SQL: &str = include_str!("sql/timers_at.sql");

/// The signals a workflow job's run may see.
pub(super) const JOURNAL_SIGNALS_SQL: &str = include_str!("sql/journal_signals.sql");

/// A job's signals that arrived after a place in its arrival order.
pub(super) const SIGNALS_ARRIVED_SINCE_SQL: &str = include_str!("sql/signals_arrived_since.sql");

/// Continue-as-new: the next run of a workflow job.
pub(super) const CONTINUE_AS_NEW_SQL: &str = include_str!("sql/continue_as_new.sql");

/// Drops the unfired timers of a run that continued as new.
pub(super) const DROP_TIMERS_BEFORE_SQL: &str = include_str!("sql/drop_timers_before.sql");

/// A workflow job's children at some positions, by key.
pub(super) const CHILDREN_AT_SQL: &str = include_str!("sql/children_at.sql");

/// MUTANT, test only: commit_activity_job_result.sql without its CAS guards (run only when
/// `crate::mutants::off("cas")`, which a normal build never answers true).
pub(super) const MUTANT_COMMIT_ACTIVITY_JOB_RESULT_SQL: &str =
    include_str!("sql/mutant_commit_activity_job_result.sql");
