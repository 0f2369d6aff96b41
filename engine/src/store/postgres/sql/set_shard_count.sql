-- `onceflow migrate --citus --shard-count N`: how many shards the tables distributed
-- next are split into (this session only; Citus's default when not set).
SELECT set_config('citus.shard_count', $1, false)
