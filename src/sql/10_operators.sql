
-- Distance functions and operators on real[] (pgvector's conventions):
-- <-> L2 distance, <#> negative inner product, <=> cosine distance.

CREATE FUNCTION l2_distance(real[], real[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'l2_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION l2_squared_distance(real[], real[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'l2_squared_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION inner_product(real[], real[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'inner_product'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION negative_inner_product(real[], real[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'negative_inner_product'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION cosine_distance(real[], real[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'cosine_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <-> (
	LEFTARG = real[], RIGHTARG = real[], FUNCTION = l2_distance,
	COMMUTATOR = '<->'
);

CREATE OPERATOR <#> (
	LEFTARG = real[], RIGHTARG = real[], FUNCTION = negative_inner_product,
	COMMUTATOR = '<#>'
);

CREATE OPERATOR <=> (
	LEFTARG = real[], RIGHTARG = real[], FUNCTION = cosine_distance,
	COMMUTATOR = '<=>'
);
