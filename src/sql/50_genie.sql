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

-- Operator-class support functions: 1 the keywords of a stored value,
-- 2 those of a query, 3 (n-grams) the class's options.

CREATE FUNCTION genie_set_keywords(anyarray, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_array_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_set_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_array_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_words_keywords(text, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_words_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_words_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_words_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_keywords(text, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_ngram_keywords_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_query(internal, internal, smallint) RETURNS internal
	AS 'MODULE_PATHNAME', 'genie_ngram_query_proc' LANGUAGE C STRICT;
CREATE FUNCTION genie_ngram_options(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'genie_ngram_options' LANGUAGE C STRICT;

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

-- Edit-distance search through an n-gram index: per query, the `candidates`
-- rows sharing the most grams, verified; exact says the answer is guaranteed.

CREATE FUNCTION genie_seq_search(index regclass, queries text[], k integer,
								 candidates integer DEFAULT 100)
	RETURNS TABLE(query integer, ctid tid, distance integer, exact boolean)
	AS 'MODULE_PATHNAME', 'genie_seq_search'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION genie_seq_search(regclass, text[], integer, integer) IS
	'k rows nearest by edit distance to each query string, through a genie_ngram_ops index: the candidates rows with most shared n-grams, verified; exact is true when no other row can be nearer than the k-th';
