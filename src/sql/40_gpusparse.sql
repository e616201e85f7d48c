-- gpusparse: exact top-k by inner product over sparse vectors (spvec), with
-- its posting lists held by the gpuindex device service.

CREATE FUNCTION gpusparse_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'gpusparse_handler' LANGUAGE C;

CREATE ACCESS METHOD gpusparse TYPE INDEX HANDLER gpusparse_handler;
COMMENT ON ACCESS METHOD gpusparse IS
	'exact sparse inner-product index (one posting list per dimension) searched by the gpuindex device service';

-- Operator-class support function 1 turns a column value into spvec (the
-- identity for spvec; another sparse type would convert).

CREATE FUNCTION gpusparse_spvec_identity(spvec) RETURNS spvec
	AS 'MODULE_PATHNAME', 'gpusparse_spvec_identity'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS spvec_ip_ops
	DEFAULT FOR TYPE spvec USING gpusparse AS
	OPERATOR 1 <#> (spvec, spvec) FOR ORDER BY float_ops,
	FUNCTION 1 gpusparse_spvec_identity(spvec);

-- Batch search: many queries, one round trip to the device service.

CREATE FUNCTION gpusparse_search(index regclass, queries spvec[], k integer)
	RETURNS TABLE(query integer, ctid tid, distance float8)
	AS 'MODULE_PATHNAME', 'gpusparse_search'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpusparse_search(regclass, spvec[], integer) IS
	'k best visible rows by inner product of a gpusparse index for each query, among the rows sharing a term with it; distance is the negative inner product';

CREATE FUNCTION gpusparse_search(index regclass, queries spvec[], k integer,
								 key_column name, key_type anyelement)
	RETURNS TABLE(query integer, key anyelement, distance float8)
	AS 'MODULE_PATHNAME', 'gpusparse_search_key'
	LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpusparse_search(regclass, spvec[], integer, name, anyelement) IS
	'like gpusparse_search(index, queries, k) but returns the value of key_column (pass NULL::its_type as key_type) instead of the ctid';

-- The same with the queries packed for drivers: per query an int32 count n,
-- n int32 0-based indices (ascending), n float4 values, all little-endian.

CREATE FUNCTION gpusparse_search_packed(index regclass, queries bytea, k integer)
	RETURNS TABLE(query integer, ctid tid, distance float8)
	AS 'MODULE_PATHNAME', 'gpusparse_search_packed'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpusparse_search_packed(regclass, bytea, integer) IS
	'gpusparse_search(index, queries, k) with the queries packed: per query int32 n, n int32 0-based indices, n float4 values, little-endian';

CREATE FUNCTION gpusparse_search_packed(index regclass, queries bytea, k integer,
										key_column name, key_type anyelement)
	RETURNS TABLE(query integer, key anyelement, distance float8)
	AS 'MODULE_PATHNAME', 'gpusparse_search_packed_key'
	LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gpusparse_search_packed(regclass, bytea, integer, name, anyelement) IS
	'gpusparse_search(index, queries, k, key_column, key_type) with the queries packed as in gpusparse_search_packed(index, queries, k)';
