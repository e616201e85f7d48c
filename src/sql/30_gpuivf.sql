-- gpuivf: IVF-flat k-NN index access method on dense float vectors, with
-- its lists held by the gpuindex device service.

CREATE FUNCTION gpuivf_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'gpuivf_handler' LANGUAGE C;

CREATE ACCESS METHOD gpuivf TYPE INDEX HANDLER gpuivf_handler;
COMMENT ON ACCESS METHOD gpuivf IS
	'inverted-file (IVF-flat) k-nearest-neighbour index searched by the gpuindex device service';

-- Operator-class support functions.  FUNCTION 1 turns a column value into
-- real[] (the identity for real[]; a vector type would convert), FUNCTION 2
-- names the metric.  The access method relies on nothing else, so other
-- vector types can get operator classes without touching it.

CREATE FUNCTION gpuivf_real_to_floats(real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'gpuivf_real_to_floats'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gpuivf_metric_l2() RETURNS integer
	AS 'MODULE_PATHNAME', 'gpuivf_metric_l2' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpuivf_metric_ip() RETURNS integer
	AS 'MODULE_PATHNAME', 'gpuivf_metric_ip' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpuivf_metric_cosine() RETURNS integer
	AS 'MODULE_PATHNAME', 'gpuivf_metric_cosine' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE OPERATOR CLASS real_l2_ops
	DEFAULT FOR TYPE real[] USING gpuivf AS
	OPERATOR 1 <-> (real[], real[]) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_real_to_floats(real[]),
	FUNCTION 2 gpuivf_metric_l2();

CREATE OPERATOR CLASS real_ip_ops
	FOR TYPE real[] USING gpuivf AS
	OPERATOR 1 <#> (real[], real[]) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_real_to_floats(real[]),
	FUNCTION 2 gpuivf_metric_ip();

CREATE OPERATOR CLASS real_cosine_ops
	FOR TYPE real[] USING gpuivf AS
	OPERATOR 1 <=> (real[], real[]) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_real_to_floats(real[]),
	FUNCTION 2 gpuivf_metric_cosine();

-- Batch search: many queries, one round trip to the device service.

CREATE FUNCTION gpuivf_search(index regclass, queries real[], k integer)
	RETURNS TABLE(query integer, ctid tid, distance float8)
	AS 'MODULE_PATHNAME', 'gpuivf_search'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpuivf_search(regclass, real[], integer) IS
	'k nearest visible rows of a gpuivf index for each query (one query per row of a 2-D array), probing gpuivf.probes lists';

CREATE FUNCTION gpuivf_search(index regclass, queries real[], k integer,
							  key_column name, key_type anyelement)
	RETURNS TABLE(query integer, key anyelement, distance float8)
	AS 'MODULE_PATHNAME', 'gpuivf_search_key'
	LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpuivf_search(regclass, real[], integer, name, anyelement) IS
	'like gpuivf_search(index, queries, k) but returns the value of key_column (pass NULL::its_type as key_type) instead of the ctid';

-- The same, with the queries as n x dim float4 values, little-endian, row after
-- row (numpy: q.astype('<f4').tobytes()): no text parsing of the floats.  A
-- name of its own, not an overload: with a bytea overload an untyped literal
-- ('{...}') given to gpuivf_search would be ambiguous.

CREATE FUNCTION gpuivf_search_packed(index regclass, queries bytea, k integer)
	RETURNS TABLE(query integer, ctid tid, distance float8)
	AS 'MODULE_PATHNAME', 'gpuivf_search_bytea'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpuivf_search_packed(regclass, bytea, integer) IS
	'gpuivf_search(index, queries, k) with the queries as n x dim little-endian float4 values, packed row after row';

CREATE FUNCTION gpuivf_search_packed(index regclass, queries bytea, k integer,
							  key_column name, key_type anyelement)
	RETURNS TABLE(query integer, key anyelement, distance float8)
	AS 'MODULE_PATHNAME', 'gpuivf_search_bytea_key'
	LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpuivf_search_packed(regclass, bytea, integer, name, anyelement) IS
	'gpuivf_search(index, queries, k, key_column, key_type) with the queries as n x dim little-endian float4 values, packed row after row';

-- Looking inside an index.

CREATE FUNCTION gpuivf_index_info(index regclass,
	OUT dim integer, OUT lists integer, OUT metric text)
	AS 'MODULE_PATHNAME', 'gpuivf_index_info'
	LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION gpuivf_index_info(regclass) IS
	'dimension, number of lists in use and metric of a gpuivf index (0 lists: nothing indexed yet)';

CREATE FUNCTION gpuivf_centroids(index regclass)
	RETURNS TABLE(list integer, centroid real[])
	AS 'MODULE_PATHNAME', 'gpuivf_centroids'
	LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION gpuivf_centroids(regclass) IS
	'the centroid of every list of a gpuivf index';

CREATE FUNCTION gpuivf_list_items(index regclass)
	RETURNS TABLE(list integer, ctid tid)
	AS 'MODULE_PATHNAME', 'gpuivf_list_items'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuivf_list_items(regclass) IS
	'every entry of a gpuivf index with the list that holds it, read from the index pages';

CREATE FUNCTION gpuivf_pq_codebooks(index regclass)
	RETURNS TABLE(subspace integer, entry integer, centroid real[])
	AS 'MODULE_PATHNAME', 'gpuivf_pq_codebooks'
	LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION gpuivf_pq_codebooks(regclass) IS
	'every codebook entry of a gpuivf index with quantizer = ''pq'' (sub-space, entry number, its floats)';

CREATE FUNCTION gpuivf_pq_codes(index regclass)
	RETURNS TABLE(list integer, ctid tid, code integer[])
	AS 'MODULE_PATHNAME', 'gpuivf_pq_codes'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION gpuivf_pq_codes(regclass) IS
	'every entry of a gpuivf index with quantizer = ''pq'': its list, row and code (one entry number per sub-space), read from the index pages';
