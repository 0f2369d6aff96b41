-- Failover (target_session_attrs=read-write): the engine writes only to a server that is
-- neither a standby in recovery nor read-only by default.
SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'
