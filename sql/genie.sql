-- genie: rows ordered by match count, checked against counts computed in
-- plain SQL (unnest, regexp_split_to_table, substr), not by the operators.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;
SELECT setseed(0.17);

-- The index's top-k against the reference: the reference counts of the rows
-- it returns, in its order, must be the k best reference counts, and the
-- operator's value must be minus the reference count on every row.
CREATE FUNCTION g_check(tab text, col text, op text, q text, ref text, k int,
						filter text DEFAULT 'true') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	got int[];
	want int[];
	wrong bigint;
	plan text := '';
	line text;
BEGIN
	FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT id FROM %s WHERE %s ORDER BY %s %s %s LIMIT %s',
							   tab, filter, col, op, q, k) LOOP
		plan := plan || line;
	END LOOP;
	IF plan NOT LIKE '%Index Scan using%' THEN
		RETURN 'plan: ' || plan;
	END IF;
	EXECUTE format('SELECT array_agg(r ORDER BY n) FROM (SELECT %s AS r, row_number() OVER () n
				   FROM (SELECT * FROM %s WHERE %s ORDER BY %s %s %s LIMIT %s) s) t',
				   replace(ref, '$col', col), tab, filter, col, op, q, k) INTO got;
	EXECUTE format('SELECT array_agg(r ORDER BY r DESC) FROM (SELECT %s AS r FROM %s
				   WHERE %s AND %s IS NOT NULL ORDER BY 1 DESC LIMIT %s) t',
				   replace(ref, '$col', col), tab, filter, col, k) INTO want;
	EXECUTE format('SET LOCAL enable_indexscan = off; SELECT count(*) FROM %s WHERE (%s %s %s) <> -(%s)',
				   tab, col, op, q, replace(ref, '$col', col)) INTO wrong;
	IF got IS DISTINCT FROM want THEN
		RETURN format('index %s, reference %s', got, want);
	ELSIF wrong <> 0 THEN
		RETURN format('operator differs from the reference on %s rows', wrong);
	END IF;
	RETURN format('ok (%s rows)', coalesce(array_length(got, 1), 0));
END $$;

-- Sets of integers: 0 to 9 elements of 1..40 (skewed), NULL elements,
-- empty arrays and NULL rows; 16 lists, so that keywords share lists and
-- the executor's recheck matters.
CREATE FUNCTION g_intset(i int) RETURNS int[] LANGUAGE sql VOLATILE AS $$
	SELECT CASE WHEN i % 53 = 0 THEN NULL WHEN i % 41 = 0 THEN '{}'::int[]
		   ELSE ARRAY(SELECT CASE WHEN random() < 0.05 THEN NULL
								  ELSE 1 + (random() * random() * 39)::int END
					  FROM generate_series(1, (random() * 9)::int + 0 * i)) END
$$;
CREATE FUNCTION ref_set(r anyarray, q anyarray) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	SELECT count(DISTINCT x)::int FROM unnest(q) x WHERE x = ANY (r)
$$;
CREATE TABLE gs (id int, cat int, tags int[], big bigint[], names text[]);
INSERT INTO gs SELECT i, i % 5, t, t::bigint[] || (i::bigint << 33),
					  (SELECT array_agg('n' || x) FROM unnest(t) x)
FROM (SELECT i, g_intset(i) t FROM generate_series(1, 1200) i) s;
CREATE INDEX gs_tags ON gs USING genie (tags) WITH (lists = 16);
SET enable_seqscan = off;
SELECT g_check('gs', 'tags', '<&>', $q$'{3,1,7}'::int[]$q$, 'ref_set($col, ''{3,1,7}''::int[])', 10);
SELECT g_check('gs', 'tags', '<&>', $q$'{2,2,5,NULL,9,11,30}'::int[]$q$, 'ref_set($col, ''{2,2,5,NULL,9,11,30}''::int[])', 25);
SELECT g_check('gs', 'tags', '<&>', $q$'{1,2,3,4,5,6}'::int[]$q$, 'ref_set($col, ''{1,2,3,4,5,6}''::int[])', 40, 'cat = 3 AND id % 7 = 0');
-- more rows than match anything: every non-NULL row comes, empty sets last
SELECT g_check('gs', 'tags', '<&>', $q$'{39,40}'::int[]$q$, 'ref_set($col, ''{39,40}''::int[])', 2000);
SELECT g_check('gs', 'tags', '<&>', $q$'{}'::int[]$q$, 'ref_set($col, ''{}''::int[])', 5);
SELECT count(*) FROM (SELECT id FROM gs ORDER BY tags <&> NULL LIMIT 3) s;

-- bigint and text sets (elements beyond 32 bits; text hashed)
CREATE INDEX gs_big ON gs USING genie (big) WITH (lists = 16);
SELECT g_check('gs', 'big', '<&>', $q$'{3,1,7,8589934592}'::bigint[]$q$, 'ref_set($col, ''{3,1,7,8589934592}''::bigint[])', 10);
CREATE INDEX gs_names ON gs USING genie (names) WITH (lists = 7);
SELECT g_check('gs', 'names', '<&>', $q$'{n3,n1,n7,x}'::text[]$q$, 'ref_set($col, ''{n3,n1,n7,x}''::text[])', 30);

-- updates: inserts after the build, deletes, VACUUM
INSERT INTO gs SELECT i, i % 5, g_intset(i) FROM generate_series(1201, 1500) i;
DELETE FROM gs WHERE id % 3 = 0;
VACUUM gs;
SELECT g_check('gs', 'tags', '<&>', $q$'{3,1,7}'::int[]$q$, 'ref_set($col, ''{3,1,7}''::int[])', 50);
SELECT g_check('gs', 'tags', '<&>', $q$'{4,5}'::int[]$q$, 'ref_set($col, ''{4,5}''::int[])', 10, 'id > 1200');

-- Documents as words, from a small vocabulary with case and punctuation;
-- the index is created empty and filled by INSERTs.
CREATE FUNCTION ref_words(d text, q text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	SELECT count(DISTINCT w)::int FROM regexp_split_to_table(lower(q), '[^a-z0-9]+') w
	WHERE w <> '' AND w IN (SELECT regexp_split_to_table(lower(d), '[^a-z0-9]+'))
$$;
CREATE TABLE gw (id int, doc text);
CREATE INDEX gw_doc ON gw USING genie (doc genie_words_ops) WITH (lists = 32);
INSERT INTO gw SELECT i,
	(SELECT string_agg((ARRAY['GPU', 'index', 'Postgres', 'vector', 'sparse', 'query', 'k-means',
							  'list', 'slab', 'BM25', 'lsh', 'n-gram', 'x', 'the', 'a'])
					   [1 + (random() * random() * 14)::int], (ARRAY[' ', ', ', '. ', '-'])[1 + (random() * 3)::int])
	 FROM generate_series(1, (random() * 12)::int + 0 * i))
FROM generate_series(1, 800) i;
SELECT g_check('gw', 'doc', '<&>', $q$'the GPU index'$q$, 'ref_words($col, ''the GPU index'')', 10);
SELECT g_check('gw', 'doc', '<&>', $q$'Sparse BM25 query, k-means; LSH!'$q$, 'ref_words($col, ''Sparse BM25 query, k-means; LSH!'')', 60);

-- Strings as 3-grams and 2-grams, over a 3-letter alphabet so that grams
-- repeat (the j-th occurrence is its own keyword) and short strings
-- (fewer characters than n) are one gram.
CREATE FUNCTION ngram_bag(s text, n int) RETURNS TABLE (g text, occ bigint)
LANGUAGE sql IMMUTABLE AS $$
	SELECT g, row_number() OVER (PARTITION BY g)
	FROM (SELECT substr(s, i, n) g FROM generate_series(1, length(s) - n + 1) i
		  UNION ALL SELECT s WHERE length(s) < n) x
$$;
CREATE FUNCTION ref_ngram(a text, b text, n int) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	SELECT count(*)::int FROM ngram_bag(a, n) x JOIN ngram_bag(b, n) y USING (g, occ)
$$;
CREATE TABLE gn (id int, s text);
INSERT INTO gn SELECT i, CASE WHEN i % 97 = 0 THEN NULL ELSE
	(SELECT coalesce(string_agg((ARRAY['a', 'b', 'c', ' '])[1 + (random() * random() * 3)::int], ''), '')
	 FROM generate_series(1, (random() * 14)::int + 0 * i)) END
FROM generate_series(1, 1000) i;
CREATE INDEX gn_s3 ON gn USING genie (s genie_ngram_ops) WITH (lists = 64);
SELECT g_check('gn', 's', '<%>', $q$'abcab'$q$, 'ref_ngram($col, ''abcab'', 3)', 10);
SELECT g_check('gn', 's', '<%>', $q$'aaaaaa'$q$, 'ref_ngram($col, ''aaaaaa'', 3)', 30);
SELECT g_check('gn', 's', '<%>', $q$'ab'$q$, 'ref_ngram($col, ''ab'', 3)', 10);
SELECT g_check('gn', 's', '<%>', $q$genie_ngrams('cab ba', 3)$q$, 'ref_ngram($col, ''cab ba'', 3)', 15);
DROP INDEX gn_s3;
CREATE INDEX gn_s2 ON gn USING genie (s genie_ngram_ops (n = 2)) WITH (lists = 64);
SELECT g_check('gn', 's', '<%>', $q$genie_ngrams('abcab', 2)$q$, 'ref_ngram($col, ''abcab'', 2)', 10);
-- a query of another n would not be bounded by this index's counts
SELECT id FROM gn ORDER BY s <%> 'abcab' LIMIT 1;
SELECT id FROM gn ORDER BY s <%> genie_ngrams('abcab', 4) LIMIT 1;
RESET enable_seqscan;

-- Edit distance through the 3-gram index, against fuzzystrmatch's
-- levenshtein() over every row: queries are rows with 1 to 3 random edits
-- and random strings.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch;
RESET client_min_messages;
CREATE FUNCTION g_mutate(s text, edits int) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	p int;
	c text;
BEGIN
	FOR j IN 1..edits LOOP
		p := 1 + (random() * greatest(length(s) - 1, 0))::int;
		c := substr('abcdefgh', 1 + (random() * 7)::int, 1);
		CASE (random() * 2)::int
			WHEN 0 THEN s := overlay(s placing c from p for 1);
			WHEN 1 THEN s := overlay(s placing '' from p for 1);
			ELSE s := overlay(s placing c from p for 0);
		END CASE;
	END LOOP;
	RETURN s;
END $$;
-- 400 random strings of 15 to 30 letters, each stored 5 times with 0 to 2
-- edits, so that a query has near rows
CREATE TABLE gq_base AS
SELECT b, (SELECT string_agg(substr('abcdefgh', 1 + (random() * 7)::int, 1), '')
		   FROM generate_series(1, 15 + (random() * 15)::int + 0 * b)) s
FROM generate_series(0, 399) b;
CREATE TABLE gq (id int, s text);
INSERT INTO gq SELECT i, g_mutate((SELECT s FROM gq_base WHERE b = (i - 1) / 5), i % 3)
FROM generate_series(1, 2000) i;
CREATE INDEX gq_s ON gq USING genie (s genie_ngram_ops) WITH (lists = 4096);
CREATE TABLE gq_q (qn int, q text);
INSERT INTO gq_q SELECT i, CASE WHEN i % 4 = 0
	THEN (SELECT string_agg(substr('abcdefgh', 1 + (random() * 7)::int, 1), '') FROM generate_series(1, 20 + 0 * i))
	ELSE g_mutate((SELECT s FROM gq_base WHERE b = (i * 37) % 400), 1 + i % 3) END
FROM generate_series(1, 40) i;
CREATE FUNCTION g_seq_check(k int, candidates int)
RETURNS TABLE (exact boolean, queries bigint, wrong_distance bigint, short bigint, differ_from_brute_force bigint)
LANGUAGE sql AS $$
	WITH r AS (SELECT r.*, q.q, levenshtein(t.s, q.q) AS ref
			   FROM genie_seq_search('gq_s', (SELECT array_agg(q ORDER BY qn) FROM gq_q), k, candidates) r
			   JOIN gq_q q ON q.qn = r.query JOIN gq t ON t.ctid = r.ctid),
	per AS (SELECT query, q, bool_and(exact) AS exact, count(*) AS n,
				   count(*) FILTER (WHERE distance <> ref) AS wrong,
				   array_agg(distance ORDER BY distance) AS got FROM r GROUP BY query, q)
	SELECT exact, count(*), sum(wrong), count(*) FILTER (WHERE n <> k),
		   count(*) FILTER (WHERE got IS DISTINCT FROM
							(SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(s, q) d FROM gq ORDER BY 1 LIMIT k) b))
	FROM per GROUP BY exact ORDER BY exact
$$;
-- exact answers must equal brute force (no row "t" with differences); with
-- few candidates fewer answers are guaranteed, and some others are wrong
SELECT * FROM g_seq_check(5, 100);
SELECT * FROM g_seq_check(5, 5);
SELECT * FROM g_seq_check(1, 100);
SELECT * FROM genie_seq_search('gq_s', '{abc}', 0);
SELECT * FROM genie_seq_search('gq_s', '{abc}', 5, 4);
SELECT * FROM genie_seq_search('gq_s', '{abc,NULL}', 5);
SELECT * FROM genie_seq_search('gs_tags', '{abc}', 5);

-- the query type, the operator classes, bad input
SELECT opcname, amvalidate(c.oid) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE amname = 'genie' ORDER BY 1;
SELECT genie_ngrams('kitten'), genie_ngrams('a:b', 5), '2:x y'::genie_ngram_query;
SELECT 'kitten'::genie_ngram_query;
SELECT '0:kitten'::genie_ngram_query;
SELECT genie_ngrams('kitten', 33);
SELECT 'kitten' <%> genie_ngrams('sitting', 1), 'kitten' <%> 'sitting';
SELECT '{1,2}'::int[] <&> '{2,3,NULL}', 'A b, a' <&> 'a B c';
CREATE INDEX ON gs USING genie (tags) WITH (lists = 0);
CREATE INDEX ON gn USING genie (s genie_ngram_ops (n = 40));
CREATE INDEX ON gn USING genie (s);
CREATE INDEX ON gs USING genie (cat);

DROP TABLE gs, gw, gn, gq, gq_q, gq_base;
