-- Whether the database runs Citus (the extension is installed in it): the store then
-- takes the statements that reach one shard each (the `citus_*` files), owner by owner.
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
