//! The SQLite statements, one `.sql` file each under `sql/`: the same file name in
//! `store/postgres/sql/` is the same statement in PostgreSQL's dialect. Where SQLite does
//! in several statements (and some Rust) what PostgreSQL does in one, the steps have names
//! of their own.

/// A job's activities in order, for its view.
pub(super) const VIEW_ACTIVITIES_OF_JOB_SQL: &str = include_str!("sql/view_activities_of_job.sql");

/// A job's attempts by activity and number, for its view.
pub(super) const VIEW_ATTEMPTS_OF_JOB_SQL: &str = include_str!("sql/view_attempts_of_job.sql");

/// Answers when the database answers.
pub(super) const PING_SQL: &str = include_str!("sql/ping.sql");

/// Finds the owner and job of an attempt visible in `scope`.
pub(super) const LOCATE_ATTEMPT_SQL: &str = include_str!("sql/locate_attempt.sql");

/// The owner of a job visible in `scope`.
pub(super) const JOB_OWNER_SQL: &str = include_str!("sql/job_owner.sql");

/// A job visible in `scope`, with its activities and attempts.
pub(super) const JOB_VIEW_SQL: &str = include_str!("sql/job_view.sql");

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

/// Retention, first: chooses up to `limit` jobs finished before the cutoff, none of whose
/// attempts is live, oldest first.
pub(super) const PRUNABLE_JOBS_SQL: &str = include_str!("sql/prunable_jobs.sql");

/// Registers (or confirms, making it current again) an output contract.
pub(super) const REGISTER_CONTRACT_SQL: &str = include_str!("sql/register_contract.sql");

/// Records a certification run, stamped with the database's clock when it is written (never an
pub(super) const INSERT_CERTIFICATION_SQL: &str = include_str!("sql/insert_certification.sql");

/// Stores a new token (its hash).
pub(super) const INSERT_TOKEN_SQL: &str = include_str!("sql/insert_token.sql");

/// The unrevoked token with this hash.
pub(super) const TOKEN_BY_HASH_SQL: &str = include_str!("sql/token_by_hash.sql");

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

/// Heartbeat, step 1: a started attempt held by the token, with what its lease is computed from.
pub(super) const LEASE_OF_STARTED_ATTEMPT_SQL: &str =
    include_str!("sql/lease_of_started_attempt.sql");

/// Heartbeat, step 2: the lease of a started attempt held by the token, renewed.
pub(super) const RENEW_STARTED_LEASE_SQL: &str = include_str!("sql/renew_started_lease.sql");

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

/// Revival, step 1: what an attempt's fresh lease is computed from.
pub(super) const LEASE_TERMS_OF_ATTEMPT_SQL: &str = include_str!("sql/lease_terms_of_attempt.sql");

/// Revival, step 2: `unknown` → `started` with a fresh lease, for the holder of its lease token.
pub(super) const REVIVE_UNKNOWN_ATTEMPT_SQL: &str = include_str!("sql/revive_unknown_attempt.sql");

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

/// Claim, step 1: the available scheduled attempts of the registered (activity, provider) pairs, in dispatch order.
pub(super) const CLAIMABLE_ATTEMPTS_SQL: &str = include_str!("sql/claimable_attempts.sql");

/// Claim, step 2: the activity of an attempt being handed out (position, input, options, version).
pub(super) const ACTIVITY_OF_CLAIMED_ATTEMPT_SQL: &str =
    include_str!("sql/activity_of_claimed_attempt.sql");

/// Claim, step 3: a scheduled attempt → started, with its lease.
pub(super) const START_CLAIMED_ATTEMPT_SQL: &str = include_str!("sql/start_claimed_attempt.sql");

/// Claim, step 4: its activity scheduled → running.
pub(super) const START_CLAIMED_ACTIVITY_SQL: &str = include_str!("sql/start_claimed_activity.sql");

/// Claim, step 5: its job queued → running.
pub(super) const START_CLAIMED_JOB_SQL: &str = include_str!("sql/start_claimed_job.sql");

/// Workflow-task claim, step 1: the ready and unleased (or expired) workflow tasks, oldest first.
pub(super) const CLAIMABLE_WORKFLOW_TASKS_SQL: &str =
    include_str!("sql/claimable_workflow_tasks.sql");

/// Workflow-task claim, step 2: the task leased to the worker.
pub(super) const START_WORKFLOW_TASK_SQL: &str = include_str!("sql/start_workflow_task.sql");

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

/// A job's children by position, for its view.
pub(super) const VIEW_CHILDREN_OF_JOB_SQL: &str = include_str!("sql/view_children_of_job.sql");

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

/// The compensation deadlines' loop: jobs whose compensation bound passed.
pub(super) const LOCK_DUE_COMPENSATIONS_SQL: &str = include_str!("sql/lock_due_compensations.sql");

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

/// Locks (without waiting) up to `limit` due, unfired timers with their jobs.
pub(super) const LOCK_DUE_TIMERS_SQL: &str = include_str!("sql/lock_due_timers.sql");

/// Fires a due timer once.
pub(super) const FIRE_TIMER_SQL: &str = include_str!("sql/fire_timer.sql");

/// Locks (without waiting) up to `limit` started attempts whose lease has expired, with their
pub(super) const LOCK_EXPIRED_LEASES_SQL: &str = include_str!("sql/lock_expired_leases.sql");

/// Locks (without waiting) up to `limit` scheduled attempts past their schedule-to-start
pub(super) const LOCK_OVERDUE_SCHEDULED_SQL: &str = include_str!("sql/lock_overdue_scheduled.sql");

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

/// Retention, after the jobs are chosen: deletes their attempts.
pub(super) const DELETE_PRUNED_ATTEMPTS_SQL: &str = include_str!("sql/delete_pruned_attempts.sql");

/// Retention: deletes the chosen jobs' activities.
pub(super) const DELETE_PRUNED_ACTIVITIES_SQL: &str =
    include_str!("sql/delete_pruned_activities.sql");

/// Retention: deletes the chosen jobs' events.
pub(super) const DELETE_PRUNED_JOB_EVENTS_SQL: &str =
    include_str!("sql/delete_pruned_job_events.sql");

/// Retention: deletes the chosen jobs' timers.
pub(super) const DELETE_PRUNED_TIMERS_SQL: &str = include_str!("sql/delete_pruned_timers.sql");

/// Retention: deletes the chosen jobs' signals.
pub(super) const DELETE_PRUNED_SIGNALS_SQL: &str = include_str!("sql/delete_pruned_signals.sql");

/// Retention: deletes the chosen jobs' patch markers.
pub(super) const DELETE_PRUNED_PATCHES_SQL: &str = include_str!("sql/delete_pruned_patches.sql");

/// Retention, last: deletes the chosen jobs (`?` a JSON array of [owner, id]).
pub(super) const DELETE_PRUNED_JOB_ROWS_SQL: &str = include_str!("sql/delete_pruned_job_rows.sql");

/// How every write transaction begins: it takes SQLite's write lock at once, so that it never
pub(super) const BEGIN_IMMEDIATE_SQL: &str = include_str!("sql/begin_immediate.sql");

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
