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
-- a NULL query gives no rows (a literal NULL would drop the ordering: a generic plan)
PREPARE gs_null(int[]) AS SELECT count(*) FROM (SELECT id FROM gs ORDER BY tags <&> $1 LIMIT 3) s;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE gs_null(NULL);
EXECUTE gs_null(NULL);
RESET plan_cache_mode;

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
-- a query of another n would not be bounded by this index's counts: the
-- planner leaves the index to a query it knows, the scan refuses a parameter
EXPLAIN (COSTS OFF) SELECT id FROM gn ORDER BY s <%> 'abcab' LIMIT 1;
PREPARE gn_q(genie_ngram_query) AS SELECT id FROM gn ORDER BY s <%> $1 LIMIT 1;
SET plan_cache_mode = force_generic_plan;
EXECUTE gn_q(genie_ngrams('abcab', 4));
RESET plan_cache_mode;
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

-- Vectors through LSH, against a sequential scan of the same operator (the
-- hash functions themselves are checked against the collision formulas in
-- the unit tests): 2,000 clustered 8-d vectors, fewer lists than m * d so
-- that functions share lists, inserts and deletes after the build.
CREATE TABLE gv (id int, v real[]);
INSERT INTO gv SELECT i, ARRAY(SELECT (i % 20) + random() * 3 FROM generate_series(1, 8))::real[]
FROM generate_series(1, 2000) i;
CREATE INDEX gv_e2 ON gv USING genie (v genie_e2lsh_ops (m = 24, w = 2, d = 64, seed = 7))
	WITH (lists = 500);
SET enable_seqscan = off;
SELECT g_check('gv', 'v', '<~>', $q$genie_e2lsh('{5,5,5,5,5,5,5,5}', 24, 2, 64, 7)$q$,
			   '-($col <~> genie_e2lsh(''{5,5,5,5,5,5,5,5}'', 24, 2, 64, 7))', 20);
-- a stored vector agrees with itself on all m functions and comes first
SELECT id, v <~> genie_e2lsh(v, 24, 2, 64, 7) AS self FROM gv
ORDER BY v <~> genie_e2lsh((SELECT v FROM gv WHERE id = 777), 24, 2, 64, 7) LIMIT 1;
INSERT INTO gv SELECT i, ARRAY(SELECT 5 + random() + 0 * i FROM generate_series(1, 8))::real[] FROM generate_series(2001, 2100) i;
DELETE FROM gv WHERE id % 4 = 0;
SELECT g_check('gv', 'v', '<~>', $q$genie_e2lsh('{5,5,5,5,5,5,5,5}', 24, 2, 64, 7)$q$,
			   '-($col <~> genie_e2lsh(''{5,5,5,5,5,5,5,5}'', 24, 2, 64, 7))', 120);
-- 65,536 lists keep its 16 x 32 function values apart: the scan's counts are
-- the operator's and it asks the executor for no recheck
CREATE INDEX gv_rb ON gv USING genie (v genie_rbin_ops (m = 16, sigma = 4, d = 32));
SELECT g_check('gv', 'v', '<~>', $q$genie_rbin('{15,14,16,15,15,14,16,15}', 16, 4, 32)$q$,
			   '-($col <~> genie_rbin(''{15,14,16,15,15,14,16,15}'', 16, 4, 32))', 30);
-- a query goes to the index that hashes as it does, else to no index; a
-- parameter the planner cannot see is refused by the scan
EXPLAIN (COSTS OFF) SELECT id FROM gv ORDER BY v <~> genie_rbin('{5,5,5,5,5,5,5,5}', 16, 4, 32) LIMIT 1;
EXPLAIN (COSTS OFF) SELECT id FROM gv ORDER BY v <~> genie_e2lsh('{5,5,5,5,5,5,5,5}', 24, 2, 64, 7) LIMIT 1;
EXPLAIN (COSTS OFF) SELECT id FROM gv ORDER BY v <~> genie_e2lsh('{5,5,5,5,5,5,5,5}', 24, 2, 64, 8) LIMIT 1;
DROP INDEX gv_e2;
PREPARE gv_q(genie_lsh_query) AS SELECT id FROM gv ORDER BY v <~> $1 LIMIT 1;
SET plan_cache_mode = force_generic_plan;
EXECUTE gv_q(genie_rbin('{5,5,5,5,5,5,5,5}'));
EXECUTE gv_q(genie_rbin('{5,5,5,5}', 16, 4, 32));
RESET plan_cache_mode;

-- Rows as (attribute, value) pairs with range items, against the same
-- count written as SQL predicates; NULL attributes, negative values, open
-- bounds, ranges over every list, and 7 lists so that ranges wrap.
CREATE TABLE gr (id int, age int, income int, grade int);
INSERT INTO gr SELECT i, (random() * 80)::int, (random() * 200000)::int - 50000,
	CASE WHEN i % 10 = 0 THEN NULL ELSE (random() * 5)::int END
FROM generate_series(1, 3000) i;
CREATE INDEX gr_row ON gr USING genie ((ARRAY[age, income, grade]) genie_row_ops) WITH (lists = 7);
SELECT g_check('gr', 'ARRAY[age, income, grade]', '<&>', $q$genie_ranges('{30,1000,2}', '{40,2000,2}')$q$,
			   '(age BETWEEN 30 AND 40)::int + (income BETWEEN 1000 AND 2000)::int + coalesce((grade = 2)::int, 0)', 40);
SELECT g_check('gr', 'ARRAY[age, income, grade]', '<&>', $q$'{2:-50000..-40000, 3:0..1, 1:79..80, 2:-100..100}'::genie_ranges$q$,
			   '(income BETWEEN -50000 AND -40000)::int + coalesce((grade BETWEEN 0 AND 1)::int, 0) + (age >= 79)::int + (income BETWEEN -100 AND 100)::int', 60);
SELECT g_check('gr', 'ARRAY[age, income, grade]', '<&>', $q$genie_ranges('{NULL,NULL,4}', '{20,NULL,NULL}')$q$,
			   '(age <= 20)::int + coalesce((grade >= 4)::int, 0)', 25, 'id % 2 = 0');
-- an item that matches nothing, one that matches every row with the attribute
SELECT g_check('gr', 'ARRAY[age, income, grade]', '<&>', $q$'{1:50..10, 3:-2147483648..2147483647, 4:1}'::genie_ranges$q$,
			   'coalesce((grade IS NOT NULL)::int, 0)', 10);
DROP INDEX gr_row;
CREATE INDEX gr_row ON gr USING genie ((ARRAY[age, income, grade]) genie_row_ops) WITH (lists = 65536);
UPDATE gr SET age = 35 WHERE id % 50 = 1;
SELECT g_check('gr', 'ARRAY[age, income, grade]', '<&>', $q$genie_ranges('{35,-10,NULL}', '{35,10000,NULL}')$q$,
			   '(age = 35)::int + (income BETWEEN -10 AND 10000)::int', 100);
RESET enable_seqscan;

-- tau-ANN: the bound and the exact binomial requirement; the expected
-- values were computed independently with scipy.stats.binom (smallest m by
-- a linear scan over the same grid of collision probabilities)
SELECT e, d, f.* FROM (VALUES (0.1, 0.05), (0.05, 0.01), (0.2, 0.1), (0.1, 0.001)) t(e, d),
	genie_lsh_functions(e, d) f;
SELECT * FROM genie_lsh_functions(0.001, 0.1);
SELECT * FROM genie_lsh_functions(0.1, 0);

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
SELECT genie_e2lsh('{1,2}', 8, 2.5, 16, 1), genie_rbin('{1,2}'), 'e2lsh(m=2, d=3, w=0.5, seed=9) {1, 2.5}'::genie_lsh_query;
SELECT '{1,2}'::real[] <~> genie_e2lsh('{1,2}', 8), '{1,2}'::real[] <~> genie_rbin('{1,2}', 4);
SELECT 'e2lsh(m=2, d=3, sigma=0.5, seed=9) {1}'::genie_lsh_query;
SELECT 'lsh(m=2, d=3, w=0.5, seed=9) {1}'::genie_lsh_query;
SELECT genie_e2lsh('{1,NaN}');
SELECT genie_e2lsh('{1,2}', 0);
SELECT genie_e2lsh('{1,2}', 4096, 1, 1048577);
SELECT genie_rbin('{1,2}', 8, 0);
SELECT '{1,2,3}'::real[] <~> genie_e2lsh('{1,2}');
CREATE INDEX ON gv USING genie (v genie_e2lsh_ops (m = 4096, d = 16777216));
CREATE INDEX ON gv USING genie (v genie_rbin_ops (w = 1));
SELECT '{ 1 : -5 .. 7 ,2:3}'::genie_ranges, '{}'::genie_ranges, genie_ranges('{NULL,1}', '{NULL,2}');
SELECT '{1,2,3}'::int[] <&> '{1:1..1, 2:0..1, 3:4..9, 9:1}'::genie_ranges, '{NULL,2}'::int[] <&> '{1:0..5, 2:2}'::genie_ranges;
SELECT '{0:1}'::genie_ranges;
SELECT '{1:1..}'::genie_ranges;
SELECT '{1:99999999999}'::genie_ranges;
SELECT genie_ranges('{1,2}', '{3}');
SELECT genie_ranges('{{1}}', '{{3}}');

DROP TABLE gs, gw, gn, gq, gq_q, gq_base, gv, gr;
