-- genie: rows ranked by how many of a query's keywords they hold (GENIE's
-- match-count model), its posting lists held by the gpuindex device service.

CREATE FUNCTION genie_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'genie_handler' LANGUAGE C;

CREATE ACCESS METHOD genie TYPE INDEX HANDLER genie_handler;
COMMENT ON ACCESS METHOD genie IS
	'inverted index ranking rows by the number of query keywords they hold, searched by the gpuindex device service';

-- Sets: int4[], int8[] and text[].  row <&> query is minus the number of
-- distinct non-NULL query elements the row holds.

CREATE FUNCTION genie_set_distance(integer[], integer[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_array_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_set_distance(bigint[], bigint[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_array_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_set_distance(text[], text[]) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_array_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <&> (LEFTARG = integer[], RIGHTARG = integer[],
					 FUNCTION = genie_set_distance, COMMUTATOR = '<&>');
CREATE OPERATOR <&> (LEFTARG = bigint[], RIGHTARG = bigint[],
					 FUNCTION = genie_set_distance, COMMUTATOR = '<&>');
CREATE OPERATOR <&> (LEFTARG = text[], RIGHTARG = text[],
					 FUNCTION = genie_set_distance, COMMUTATOR = '<&>');

-- Documents as words: maximal runs of letters and digits, ASCII lower-cased.
-- doc <&> query is minus the number of distinct query words in doc.

CREATE FUNCTION genie_words_distance(text, text) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_words_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <&> (LEFTARG = text, RIGHTARG = text,
					 FUNCTION = genie_words_distance, COMMUTATOR = '<&>');

-- Strings as n-grams: the j-th occurrence of a gram is a keyword of its own,
-- so s <%> q is minus the sum over grams of the smaller occurrence count.
-- `<%> 'text'` counts 3-grams; genie_ngrams(text, n) makes a query of any n.

CREATE TYPE genie_ngram_query;
CREATE FUNCTION genie_ngram_query_in(cstring) RETURNS genie_ngram_query
	AS 'MODULE_PATHNAME', 'genie_ngram_query_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ngram_query_out(genie_ngram_query) RETURNS cstring
	AS 'MODULE_PATHNAME', 'genie_ngram_query_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE genie_ngram_query (
	INPUT = genie_ngram_query_in,
	OUTPUT = genie_ngram_query_out,
	INTERNALLENGTH = VARIABLE,
	STORAGE = extended
);
COMMENT ON TYPE genie_ngram_query IS
	'an n-gram query with its own n (text form n:string), made by genie_ngrams(string, n)';

CREATE FUNCTION genie_ngrams(string text, n integer DEFAULT 3) RETURNS genie_ngram_query
	AS 'MODULE_PATHNAME', 'genie_ngrams_query'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_ngram_distance(text, text) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_ngram_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ngram_distance(text, genie_ngram_query) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_ngram_query_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <%> (LEFTARG = text, RIGHTARG = text,
					 FUNCTION = genie_ngram_distance, COMMUTATOR = '<%>');
CREATE OPERATOR <%> (LEFTARG = text, RIGHTARG = genie_ngram_query,
					 FUNCTION = genie_ngram_distance);

-- Vectors through LSH: real[] <~> genie_lsh_query is minus the number of
-- the query's m hash functions on which the two vectors agree.  A query
-- carries its family and parameters: genie_e2lsh(v, m, w, d, seed) for the
-- L2 distance, genie_rbin(v, m, sigma, d, seed) for the Laplacian kernel.

CREATE TYPE genie_lsh_query;
CREATE FUNCTION genie_lsh_query_in(cstring) RETURNS genie_lsh_query
	AS 'MODULE_PATHNAME', 'genie_lsh_query_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_lsh_query_out(genie_lsh_query) RETURNS cstring
	AS 'MODULE_PATHNAME', 'genie_lsh_query_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE genie_lsh_query (
	INPUT = genie_lsh_query_in,
	OUTPUT = genie_lsh_query_out,
	INTERNALLENGTH = VARIABLE,
	STORAGE = extended
);
COMMENT ON TYPE genie_lsh_query IS
	'a vector with the LSH family and parameters to hash it with, made by genie_e2lsh() or genie_rbin()';

CREATE FUNCTION genie_e2lsh(v real[], m integer DEFAULT 64, w real DEFAULT 4,
							d integer DEFAULT 1024, seed integer DEFAULT 0)
	RETURNS genie_lsh_query
	AS 'MODULE_PATHNAME', 'genie_e2lsh_query'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION genie_e2lsh(real[], integer, real, integer, integer) IS
	'an E2LSH query (L2 distance): m functions floor((a.v + b) / w), each re-hashed into d lists; the parameters must be those of the index';
CREATE FUNCTION genie_rbin(v real[], m integer DEFAULT 64, sigma real DEFAULT 1,
						   d integer DEFAULT 1024, seed integer DEFAULT 0)
	RETURNS genie_lsh_query
	AS 'MODULE_PATHNAME', 'genie_rbin_query'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION genie_rbin(real[], integer, real, integer, integer) IS
	'a random-binning query (Laplacian kernel exp(-|x - y|_1 / sigma)): m functions, each re-hashed into d lists; the parameters must be those of the index';

CREATE FUNCTION genie_lsh_distance(real[], genie_lsh_query) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_lsh_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <~> (LEFTARG = real[], RIGHTARG = genie_lsh_query,
					 FUNCTION = genie_lsh_distance);

CREATE FUNCTION genie_lsh_functions(epsilon float8, delta float8,
									OUT bound integer, OUT binomial integer)
	AS 'MODULE_PATHNAME', 'genie_lsh_functions'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION genie_lsh_functions(float8, float8) IS
	'hash functions m for a tau-ANN ranking: GENIE''s bound 2 ln(3/delta)/epsilon^2, and the smallest m at which every row''s count is within epsilon m of its mean with probability 1 - delta (exact binomial tails)';

-- Rows: an expression index over ARRAY[a, b, ...]::integer[] (attribute i is
-- the i-th element); row <&> genie_ranges is minus the number of the query's
-- (attribute, low..high) items the row lies in.

CREATE TYPE genie_ranges;
CREATE FUNCTION genie_ranges_in(cstring) RETURNS genie_ranges
	AS 'MODULE_PATHNAME', 'genie_ranges_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_out(genie_ranges) RETURNS cstring
	AS 'MODULE_PATHNAME', 'genie_ranges_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE genie_ranges (
	INPUT = genie_ranges_in,
	OUTPUT = genie_ranges_out,
	INTERNALLENGTH = VARIABLE,
	STORAGE = extended
);
COMMENT ON TYPE genie_ranges IS
	'range items of a genie row query, text form {attribute:low..high, attribute:value, ...}';
CREATE FUNCTION genie_ranges(lo integer[], hi integer[]) RETURNS genie_ranges
	AS 'MODULE_PATHNAME', 'genie_ranges_make'
	LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;
COMMENT ON FUNCTION genie_ranges(integer[], integer[]) IS
	'the items lo[i]..hi[i] for attribute i; a NULL bound is open, both NULL no item';

CREATE FUNCTION genie_row_distance(integer[], genie_ranges) RETURNS float8
	AS 'MODULE_PATHNAME', 'genie_row_distance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <&> (LEFTARG = integer[], RIGHTARG = genie_ranges,
					 FUNCTION = genie_row_distance);

-- Operator-class support functions: 1 the keywords of a stored value,
-- 2 those of a query, 3 (n-grams) the class's options.

CREATE FUNCTION genie_set_keywords(anyarray, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_array_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_set_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_array_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_words_keywords(text, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_words_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_words_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_words_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_keywords(text, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_ngram_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_ngram_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_options(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'genie_ngram_options' LANGUAGE C STRICT;
CREATE FUNCTION genie_e2lsh_keywords(real[], internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_e2lsh_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_e2lsh_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_e2lsh_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_e2lsh_options(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'genie_e2lsh_options' LANGUAGE C STRICT;
CREATE FUNCTION genie_rbin_keywords(real[], internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_rbin_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_rbin_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_rbin_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_rbin_options(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'genie_rbin_options' LANGUAGE C STRICT;
CREATE FUNCTION genie_row_keywords(integer[], internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_row_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_row_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_row_query_proc' LANGUAGE C STRICT;

CREATE OPERATOR CLASS genie_int4_ops
	DEFAULT FOR TYPE integer[] USING genie AS
	OPERATOR 1 <&> (integer[], integer[]) FOR ORDER BY float_ops,
	FUNCTION 1 genie_set_keywords(anyarray, internal),
	FUNCTION 2 genie_set_query(internal, internal, smallint);

CREATE OPERATOR CLASS genie_int8_ops
	DEFAULT FOR TYPE bigint[] USING genie AS
	OPERATOR 1 <&> (bigint[], bigint[]) FOR ORDER BY float_ops,
	FUNCTION 1 genie_set_keywords(anyarray, internal),
	FUNCTION 2 genie_set_query(internal, internal, smallint);

CREATE OPERATOR CLASS genie_text_set_ops
	DEFAULT FOR TYPE text[] USING genie AS
	OPERATOR 1 <&> (text[], text[]) FOR ORDER BY float_ops,
	FUNCTION 1 genie_set_keywords(anyarray, internal),
	FUNCTION 2 genie_set_query(internal, internal, smallint);

CREATE OPERATOR CLASS genie_words_ops
	FOR TYPE text USING genie AS
	OPERATOR 1 <&> (text, text) FOR ORDER BY float_ops,
	FUNCTION 1 genie_words_keywords(text, internal),
	FUNCTION 2 genie_words_query(internal, internal, smallint);

CREATE OPERATOR CLASS genie_ngram_ops
	FOR TYPE text USING genie AS
	OPERATOR 1 <%> (text, text) FOR ORDER BY float_ops,
	OPERATOR 2 <%> (text, genie_ngram_query) FOR ORDER BY float_ops,
	FUNCTION 1 genie_ngram_keywords(text, internal),
	FUNCTION 2 genie_ngram_query(internal, internal, smallint),
	FUNCTION 3 genie_ngram_options(internal);

CREATE OPERATOR CLASS genie_e2lsh_ops
	FOR TYPE real[] USING genie AS
	OPERATOR 1 <~> (real[], genie_lsh_query) FOR ORDER BY float_ops,
	FUNCTION 1 genie_e2lsh_keywords(real[], internal),
	FUNCTION 2 genie_e2lsh_query(internal, internal, smallint),
	FUNCTION 3 genie_e2lsh_options(internal);

CREATE OPERATOR CLASS genie_rbin_ops
	FOR TYPE real[] USING genie AS
	OPERATOR 1 <~> (real[], genie_lsh_query) FOR ORDER BY float_ops,
	FUNCTION 1 genie_rbin_keywords(real[], internal),
	FUNCTION 2 genie_rbin_query(internal, internal, smallint),
	FUNCTION 3 genie_rbin_options(internal);

CREATE OPERATOR CLASS genie_row_ops
	FOR TYPE integer[] USING genie AS
	OPERATOR 1 <&> (integer[], genie_ranges) FOR ORDER BY float_ops,
	FUNCTION 1 genie_row_keywords(integer[], internal),
	FUNCTION 2 genie_row_query(internal, internal, smallint);

-- Edit-distance search through an n-gram index: per query, the `candidates`
-- rows sharing the most grams, verified; exact says the answer is guaranteed.

CREATE FUNCTION genie_seq_search(index regclass, queries text[], k integer,
								 candidates integer DEFAULT 100)
	RETURNS TABLE(query integer, ctid tid, distance integer, exact boolean)
	AS 'MODULE_PATHNAME', 'genie_seq_search'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION genie_seq_search(regclass, text[], integer, integer) IS
	'k rows nearest by edit distance to each query string, through a genie_ngram_ops index: the candidates rows with most shared n-grams, verified; exact is true when no other row can be nearer than the k-th';
