-- The device service: health, round-trip cost, per-index store statistics.

CREATE FUNCTION gpuindex_ping() RETURNS void
	AS 'MODULE_PATHNAME', 'gpuindex_ping' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuindex_ping() IS
	'one empty round trip through the gpuindex device service';

CREATE FUNCTION gpuindex_ping_bench(round_trips integer, gap_us integer DEFAULT 0)
	RETURNS float8
	AS 'MODULE_PATHNAME', 'gpuindex_ping_bench' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuindex_ping_bench(integer, integer) IS
	'mean microseconds of an empty device-service round trip, timed in the backend; gap_us sleeps between trips so that each pays the wake-ups of a lone query';

CREATE FUNCTION gpuindex_service(
	OUT pid integer,
	OUT generation bigint,
	OUT started timestamptz,
	OUT backend text,
	OUT device text,
	OUT requests bigint,
	OUT rounds bigint,
	OUT mean_batch float8,
	OUT stores bigint,
	OUT bytes bigint,
	OUT devices integer,
	OUT waiting integer,
	OUT round_seconds float8,
	OUT search_seconds float8)
	AS 'MODULE_PATHNAME', 'gpuindex_service' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuindex_service() IS
	'the gpuindex device service: process, compute backend (device: its first device; devices: how many it uses), request counters, sessions waiting for an answer now, seconds spent in rounds and of them in compute backend searches';

CREATE FUNCTION gpuindex_store_stats(
	OUT dbid oid,
	OUT indexrelid oid,
	OUT index_name text,
	OUT relfilenode oid,
	OUT kind text,
	OUT backend text,
	OUT state text,
	OUT dim integer,
	OUT metric text,
	OUT lists bigint,
	OUT rows bigint,
	OUT slabs_used bigint,
	OUT slabs_free bigint,
	OUT bytes bigint,
	OUT payload_bytes bigint,
	OUT inserts bigint,
	OUT deletes bigint,
	OUT searches bigint,
	OUT search_batches bigint,
	OUT mean_batch_size float8,
	OUT loads bigint,
	OUT device integer)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'gpuindex_store_stats' LANGUAGE C VOLATILE STRICT;

-- every database's index names and activity: not for every role
REVOKE ALL ON FUNCTION gpuindex_store_stats() FROM PUBLIC;

CREATE VIEW gpuindex_stats AS
	SELECT * FROM gpuindex_store_stats();
COMMENT ON VIEW gpuindex_stats IS
	'one row per index store held by the gpuindex device service (all databases)';

CREATE FUNCTION gpuindex_search_stages(
	OUT stage text,
	OUT us double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'gpuindex_search_stages'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION gpuindex_search_stages() IS
	'where the time of this session''s last gpuindex search statement went, stage by stage (microseconds; see docs/query-path.md)';
