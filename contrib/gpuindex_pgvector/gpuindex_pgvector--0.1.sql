-- gpuindex_pgvector: moving from pgvector changes only the CREATE INDEX line.
-- gpuivf indexes vector and halfvec columns, gpusparse indexes sparsevec
-- columns, ordered by pgvector's own operators.  Support function 1 turns a
-- value into what the access method reads: pgvector's own casts to real[]
-- for vector and halfvec; for sparsevec the value itself, whose layout is
-- gpuindex's spvec (dimension, non-zeros, 0-based ascending indices, then
-- float4 values).

\echo Use "CREATE EXTENSION gpuindex_pgvector" to load this file. \quit

CREATE FUNCTION gpuivf_vector_to_floats(vector) RETURNS real[]
	AS '$libdir/vector', 'vector_to_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gpuivf_halfvec_to_floats(halfvec) RETURNS real[]
	AS '$libdir/vector', 'halfvec_to_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gpusparse_sparsevec_to_spvec(sparsevec) RETURNS spvec
	AS '$libdir/gpuindex', 'gpusparse_spvec_identity' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS vector_l2_ops
	DEFAULT FOR TYPE vector USING gpuivf AS
	OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_vector_to_floats(vector),
	FUNCTION 2 gpuivf_metric_l2();

CREATE OPERATOR CLASS vector_ip_ops
	FOR TYPE vector USING gpuivf AS
	OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_vector_to_floats(vector),
	FUNCTION 2 gpuivf_metric_ip();

CREATE OPERATOR CLASS vector_cosine_ops
	FOR TYPE vector USING gpuivf AS
	OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_vector_to_floats(vector),
	FUNCTION 2 gpuivf_metric_cosine();

CREATE OPERATOR CLASS halfvec_l2_ops
	DEFAULT FOR TYPE halfvec USING gpuivf AS
	OPERATOR 1 <-> (halfvec, halfvec) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_halfvec_to_floats(halfvec),
	FUNCTION 2 gpuivf_metric_l2();

CREATE OPERATOR CLASS halfvec_ip_ops
	FOR TYPE halfvec USING gpuivf AS
	OPERATOR 1 <#> (halfvec, halfvec) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_halfvec_to_floats(halfvec),
	FUNCTION 2 gpuivf_metric_ip();

CREATE OPERATOR CLASS halfvec_cosine_ops
	FOR TYPE halfvec USING gpuivf AS
	OPERATOR 1 <=> (halfvec, halfvec) FOR ORDER BY float_ops,
	FUNCTION 1 gpuivf_halfvec_to_floats(halfvec),
	FUNCTION 2 gpuivf_metric_cosine();

CREATE OPERATOR CLASS sparsevec_ip_ops
	DEFAULT FOR TYPE sparsevec USING gpusparse AS
	OPERATOR 1 <#> (sparsevec, sparsevec) FOR ORDER BY float_ops,
	FUNCTION 1 gpusparse_sparsevec_to_spvec(sparsevec);
