-- Stores spread over several devices: where each store's records are.

CREATE FUNCTION gpuindex_store_shards(
	OUT dbid oid,
	OUT indexrelid oid,
	OUT index_name text,
	OUT shard integer,
	OUT shards integer,
	OUT device integer,
	OUT ordinal integer,
	OUT lists bigint,
	OUT rows bigint,
	OUT keys bigint,
	OUT slabs_used bigint,
	OUT bytes bigint,
	OUT payload_bytes bigint,
	OUT inserts bigint,
	OUT deletes bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'gpuindex_store_shards' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuindex_store_shards() IS
	'one row per shard of each index store held by the gpuindex device service (all databases): device is the service''s device number (gpuindex.devices), ordinal the compute backend''s device it is on';

-- every database's index names: not for every role
REVOKE ALL ON FUNCTION gpuindex_store_shards() FROM PUBLIC;
