
-- The sparse vector type spvec: pgvector's sparsevec text form
-- {index:value,...}/dim (1-based indices), under its own name so that it
-- installs next to pgvector's sparsevec.  docs/spvec.md describes it.

CREATE TYPE spvec;

CREATE FUNCTION spvec_in(cstring, oid, integer) RETURNS spvec
	AS 'MODULE_PATHNAME', 'spvec_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_out(spvec) RETURNS cstring
	AS 'MODULE_PATHNAME', 'spvec_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_typmod_in(cstring[]) RETURNS integer
	AS 'MODULE_PATHNAME', 'spvec_typmod_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_recv(internal, oid, integer) RETURNS spvec
	AS 'MODULE_PATHNAME', 'spvec_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_send(spvec) RETURNS bytea
	AS 'MODULE_PATHNAME', 'spvec_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- STORAGE external like pgvector's types: float data hardly compresses, and
-- nnz() and dims() can then read the header of a large vector alone
CREATE TYPE spvec (
	INPUT = spvec_in,
	OUTPUT = spvec_out,
	TYPMOD_IN = spvec_typmod_in,
	RECEIVE = spvec_recv,
	SEND = spvec_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = int4,
	STORAGE = external
);

COMMENT ON TYPE spvec IS
	'sparse vector of float4 values, text form {index:value,...}/dim with 1-based indices';

-- casts: spvec(n) checks the dimension; real[] is the dense form

CREATE FUNCTION spvec(spvec, integer, boolean) RETURNS spvec
	AS 'MODULE_PATHNAME', 'spvec_typmod_cast'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_from_real_array(real[], integer, boolean) RETURNS spvec
	AS 'MODULE_PATHNAME', 'spvec_from_real_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_to_real_array(spvec) RETURNS real[]
	AS 'MODULE_PATHNAME', 'spvec_to_real_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (spvec AS spvec)
	WITH FUNCTION spvec(spvec, integer, boolean) AS IMPLICIT;

CREATE CAST (real[] AS spvec)
	WITH FUNCTION spvec_from_real_array(real[], integer, boolean) AS ASSIGNMENT;

CREATE CAST (spvec AS real[])
	WITH FUNCTION spvec_to_real_array(spvec) AS ASSIGNMENT;

-- a cast takes one source type: (indices, values) is a constructor
CREATE FUNCTION spvec(integer[], real[], integer) RETURNS spvec
	AS 'MODULE_PATHNAME', 'spvec_from_parts'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION spvec(integer[], real[], integer) IS
	'sparse vector from 1-based indices (any order), their values and the dimension';
COMMENT ON FUNCTION spvec_from_real_array(real[], integer, boolean) IS
	'cast real[] to spvec (zeros dropped)';
COMMENT ON FUNCTION spvec_to_real_array(spvec) IS
	'cast spvec to its dense real[] form';

-- distances (pgvector's conventions).  Named spvec_*: overloading the
-- real[] functions' names would make their calls with two untyped literals,
-- such as inner_product('{1,2}', '{3,4}'), ambiguous.

CREATE FUNCTION spvec_inner_product(spvec, spvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'spvec_inner_product_sql'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_negative_inner_product(spvec, spvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'spvec_negative_inner_product'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_cosine_distance(spvec, spvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'spvec_cosine_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION spvec_l2_distance(spvec, spvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'spvec_l2_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION l2_norm(spvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'spvec_l2_norm'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION nnz(spvec) RETURNS integer
	AS 'MODULE_PATHNAME', 'spvec_nnz'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION dims(spvec) RETURNS integer
	AS 'MODULE_PATHNAME', 'spvec_dims'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION spvec_inner_product(spvec, spvec) IS
	'inner product, summed in double in index order and rounded to float4';
COMMENT ON FUNCTION spvec_negative_inner_product(spvec, spvec) IS
	'negative inner product (operator <#>), rounded to float4 like spvec_inner_product';
COMMENT ON FUNCTION spvec_cosine_distance(spvec, spvec) IS
	'cosine distance 1 - cos (operator <=>), in [0, 2]; NaN for a zero vector';
COMMENT ON FUNCTION spvec_l2_distance(spvec, spvec) IS
	'Euclidean distance (operator <->)';
COMMENT ON FUNCTION l2_norm(spvec) IS 'Euclidean norm';
COMMENT ON FUNCTION nnz(spvec) IS 'number of non-zero elements';
COMMENT ON FUNCTION dims(spvec) IS 'dimension';

CREATE OPERATOR <#> (
	LEFTARG = spvec, RIGHTARG = spvec, FUNCTION = spvec_negative_inner_product,
	COMMUTATOR = '<#>'
);

CREATE OPERATOR <=> (
	LEFTARG = spvec, RIGHTARG = spvec, FUNCTION = spvec_cosine_distance,
	COMMUTATOR = '<=>'
);

CREATE OPERATOR <-> (
	LEFTARG = spvec, RIGHTARG = spvec, FUNCTION = spvec_l2_distance,
	COMMUTATOR = '<->'
);
