-- gpusparse: exact top-k by inner product, checked against sequential scans
-- of the same table (ties broken by ctid, as the index breaks them).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;

-- rows of 0 to 12 non-zeros over 40 dimensions, weights on a coarse grid so
-- that many scores tie exactly; a few NULLs
SELECT setseed(0.42);
CREATE TABLE sp_docs (id int, cat int, v spvec(40));
CREATE FUNCTION sp_random(nnz int, skew bool, grid bool) RETURNS spvec
LANGUAGE sql VOLATILE AS $$
	SELECT spvec(coalesce(array_agg(t), '{}'),
				 coalesce(array_agg(CASE WHEN grid THEN round((random() * 4 - 1)::numeric, 1)::real
										 ELSE (random() * 2 - 0.5)::real END), '{}'), 40)
	FROM (SELECT DISTINCT 1 + (CASE WHEN skew THEN random() * random() ELSE random() END * 39)::int AS t
		  FROM generate_series(1, nnz)) s
$$;
INSERT INTO sp_docs
SELECT i, i % 7,
	   CASE WHEN i % 97 = 0 THEN NULL ELSE sp_random((random() * 12)::int, true, true) END
FROM generate_series(1, 1500) i;

-- the same query through the index and through a sequential scan
CREATE FUNCTION sp_check(q spvec, k int, filter text DEFAULT 'true')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	by_index int[];
	by_seq int[];
	plan text := '';
	line text;
BEGIN
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_sort = off;
	FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT id FROM sp_docs WHERE %s ORDER BY v <#> %L LIMIT %s',
							   filter, q, k) LOOP
		plan := plan || line;
	END LOOP;
	IF plan NOT LIKE '%Index Scan%' THEN
		RETURN 'no index scan: ' || plan;
	END IF;
	EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM sp_docs WHERE %s ORDER BY v <#> %L LIMIT %s) s',
				   filter, q, k) INTO by_index;
	SET LOCAL enable_seqscan = on;
	SET LOCAL enable_sort = on;
	SET LOCAL enable_indexscan = off;
	EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM sp_docs WHERE %s AND v IS NOT NULL ORDER BY v <#> %L, ctid LIMIT %s) s',
				   filter, q, k) INTO by_seq;
	IF by_index IS NOT DISTINCT FROM by_seq THEN
		RETURN 'same ' || coalesce(array_length(by_index, 1), 0);
	END IF;
	RETURN format('differ: index %s seq %s', by_index, by_seq);
END $$;

CREATE INDEX sp_docs_v ON sp_docs USING gpusparse (v);

-- top 10 of random queries, 1 and many non-zeros
SELECT sp_check(spvec(ARRAY[1 + i % 40], ARRAY[1.5::real], 40), 10)
FROM generate_series(0, 4) i;
SELECT sp_check(sp_random(8, false, false), 10) FROM generate_series(1, 20);

-- more rows than score above zero: the rest in order, ties by ctid
SELECT sp_check('{3:1,17:-2}/40', 2000);
SELECT sp_check('{}/40', 50);
-- a rare filter still fills the LIMIT
SELECT sp_check('{1:1,2:1,3:1}/40', 25, 'cat = 3 AND id % 11 = 0');
SET gpusparse.scan_batch = 1;
SELECT sp_check('{1:1,2:0.5,5:2}/40', 300, 'id % 5 = 0');
RESET gpusparse.scan_batch;

-- the values the index hands out are the operator's
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT v <#> '{1:1,9:2}/40' AS d FROM sp_docs ORDER BY v <#> '{1:1,9:2}/40' LIMIT 30;
SELECT count(*) AS rows_with_value FROM (
	SELECT v <#> '{1:1,9:2}/40' AS d FROM sp_docs ORDER BY v <#> '{1:1,9:2}/40' LIMIT 30) s
WHERE d IS NOT NULL;
RESET enable_seqscan;

-- bad queries
SELECT id FROM sp_docs ORDER BY v <#> '{1:1}/41' LIMIT 1;
-- a NULL query gives no rows (a literal NULL would drop the ordering: a generic plan)
PREPARE sp_null(spvec) AS SELECT id FROM sp_docs ORDER BY v <#> $1 LIMIT 1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE sp_null(NULL);
EXECUTE sp_null(NULL);
RESET plan_cache_mode;

-- INSERT, DELETE, VACUUM, re-insert
INSERT INTO sp_docs VALUES (5001, 0, '{1:9,2:9}/40'), (5002, 0, '{1:9,2:9}/40'),
	(5003, 0, '{}/40'), (5004, 0, NULL);
SELECT sp_check('{1:1,2:1}/40', 5);
-- the 6 best rows dead to this snapshot but still in the index: a LIMIT 3
-- scan, whose first search asks for 3 rows, must go on to the next ones
BEGIN;
DELETE FROM sp_docs WHERE id IN (SELECT id FROM sp_docs WHERE v IS NOT NULL
	ORDER BY v <#> '{1:1,2:1}/40', ctid LIMIT 6);
SELECT sp_check('{1:1,2:1}/40', 3);
SET LOCAL enable_seqscan = off;
SET LOCAL jit = off;
SET LOCAL client_min_messages = debug1;
SELECT count(*) FROM (SELECT id FROM sp_docs ORDER BY v <#> '{1:1,2:1}/40' LIMIT 3) s;
ROLLBACK;
DELETE FROM sp_docs WHERE id % 3 = 0 OR id = 5001;
VACUUM (INDEX_CLEANUP ON) sp_docs;
SELECT sp_check('{1:1,2:1}/40', 5);
SELECT sp_check('{4:1,8:-1,30:2}/40', 40);
INSERT INTO sp_docs SELECT id + 10000, cat, v FROM sp_docs WHERE id < 300;
SELECT sp_check('{4:1,8:-1,30:2}/40', 40);
SELECT sp_check('{4:1,8:-1,30:2}/40', 5000);
-- the store holds one record per non-zero of the live rows, one list per dimension
SELECT kind, dim, lists, rows = (SELECT sum(nnz(v)) FROM sp_docs) AS rows_match
FROM gpuindex_stats WHERE indexrelid = 'sp_docs_v'::regclass;

-- wrong dimension on insert
INSERT INTO sp_docs VALUES (1, 0, '{1:1}/41'::spvec);
CREATE TABLE sp_free (v spvec);
CREATE INDEX ON sp_free USING gpusparse (v);
INSERT INTO sp_free VALUES ('{1:1}/5');
INSERT INTO sp_free VALUES ('{1:1}/6');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM sp_free ORDER BY v <#> '{1:2}/5' LIMIT 1;
SELECT v FROM sp_free ORDER BY v <#> '{1:2}/5' LIMIT 1;
RESET enable_seqscan;

-- the batch API: per query, the rows sharing a term, as ORDER BY gives them
CREATE FUNCTION sp_batch_check(qs spvec[], k int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	bad int := 0;
	n int := 0;
	got int[];
	want int[];
BEGIN
	CREATE TEMP TABLE sp_got AS
		SELECT s.query, d.id, s.distance, s.ctid AS tid
		FROM gpusparse_search('sp_docs_v', qs, k) s JOIN sp_docs d ON d.ctid = s.ctid;
	FOR i IN 1 .. array_length(qs, 1) LOOP
		SELECT array_agg(g.id ORDER BY g.distance, g.tid) INTO got
		FROM sp_got g WHERE g.query = i;
		SELECT array_agg(id) INTO want FROM (
			SELECT id FROM sp_docs
			WHERE EXISTS (SELECT 1 FROM unnest(v::real[]) WITH ORDINALITY a(x, j)
						  JOIN unnest(qs[i]::real[]) WITH ORDINALITY b(y, j2) ON j = j2
						  WHERE x <> 0 AND y <> 0)
			ORDER BY v <#> qs[i], ctid LIMIT k) s;
		n := n + 1;
		IF got IS DISTINCT FROM want THEN
			bad := bad + 1;
			RAISE NOTICE 'query %: got % want %', i, got, want;
		END IF;
	END LOOP;
	DROP TABLE sp_got;
	RETURN format('%s queries, %s differ', n, bad);
END $$;
SET enable_indexscan = off;
SELECT sp_batch_check(ARRAY['{1:1}/40', '{2:1,3:-1}/40', '{}/40', '{39:1,40:2}/40',
							'{5:1,6:1,7:1,8:1}/40']::spvec[], 7);
-- 150 queries: the call is searched in parts, each sent ahead of the rows' checks
SELECT sp_batch_check(ARRAY(SELECT format('{%s:1,%s:2}/40', 1 + i % 40, 1 + (i * 7 + 3) % 40)::spvec
							FROM generate_series(1, 150) i), 5);
RESET enable_indexscan;
SELECT count(*) FROM gpusparse_search('sp_docs_v', ARRAY['{1:1}/40']::spvec[], 3,
									  'id', NULL::int) WHERE key IS NOT NULL;
-- the packed form: int32 n, n int32 0-based indices, n float4, little-endian
SELECT query, key, distance FROM gpusparse_search_packed('sp_docs_v',
	'\x02000000000000000100000000000040000000c0'::bytea, 3, 'id', NULL::int)
EXCEPT ALL
SELECT query, key, distance FROM gpusparse_search('sp_docs_v',
	ARRAY['{1:2,2:-2}/40']::spvec[], 3, 'id', NULL::int);
SELECT * FROM gpusparse_search_packed('sp_docs_v', '\x05000000'::bytea, 3);
SELECT * FROM gpusparse_search_packed('sp_docs_v', '\x020000000100000001000000000000400000c03f'::bytea, 3);
SELECT * FROM gpusparse_search('sp_docs_v', ARRAY['{1:1}/40']::spvec[], 0);
SELECT * FROM gpusparse_search('sp_docs_v', ARRAY['{1:1}/39']::spvec[], 1);
SELECT * FROM gpusparse_search('sp_docs_v', ARRAY[NULL]::spvec[], 1);

-- a row with 100,000 non-zeros is indexed and found
CREATE TABLE sp_big (id int, v spvec(200000));
INSERT INTO sp_big SELECT 1, spvec(ARRAY(SELECT generate_series(1, 200000, 2)),
	ARRAY(SELECT 0.5::real FROM generate_series(1, 100000)), 200000);
INSERT INTO sp_big VALUES (2, '{2:1,4:1}/200000'), (3, '{3:5}/200000');
CREATE INDEX ON sp_big USING gpusparse (v);
INSERT INTO sp_big SELECT 4, spvec(ARRAY(SELECT generate_series(2, 200000, 2)),
	ARRAY(SELECT 0.25::real FROM generate_series(1, 100000)), 200000);
SET enable_seqscan = off;
SELECT id, v <#> '{1:1,2:1,3:1,199999:1}/200000' AS d FROM sp_big
ORDER BY v <#> '{1:1,2:1,3:1,199999:1}/200000' LIMIT 4;
RESET enable_seqscan;
SELECT nnz(v) FROM sp_big ORDER BY id;

-- items as stored: the extreme terms (4-byte varints), runs whose weights
-- are all 1 (stored without weights) next to runs that are not, and rows
-- split into several runs; every row, ranked by the index (the rows at
-- distance >= 0 scored from the pages), equals a sequential scan
CREATE TABLE sp_enc (id int, v spvec(16777216));
INSERT INTO sp_enc VALUES
	(1, '{1:1,16777216:1}/16777216'), (2, '{16777216:3}/16777216'),
	(3, '{1:1,2:1,3:2}/16777216'), (4, '{128:1,129:1,16384:1,2097152:1}/16777216'),
	(5, '{}/16777216');
INSERT INTO sp_enc SELECT 6, spvec(ARRAY(SELECT generate_series(1, 3000, 2)),
	ARRAY(SELECT 1::real FROM generate_series(1, 1500)), 16777216);
INSERT INTO sp_enc SELECT 7, spvec(ARRAY(SELECT generate_series(2, 3000, 2)),
	ARRAY(SELECT CASE WHEN i = 1200 THEN 2 ELSE 1 END::real FROM generate_series(1, 1500) i),
	16777216);
CREATE INDEX sp_enc_v ON sp_enc USING gpusparse (v);
INSERT INTO sp_enc VALUES (8, '{1:1,16777215:1,16777216:1}/16777216');
-- the first n rows of tbl by v <#> q, through the index or by a sequential
-- scan (ties by ctid), as id:distance,...
CREATE FUNCTION sp_rank(tbl regclass, q spvec, n int, use_index bool) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	IF use_index THEN
		SET LOCAL enable_seqscan = off;
		SET LOCAL enable_sort = off;
		EXECUTE format('SELECT string_agg(id || '':'' || d, '','') FROM
			(SELECT id, v <#> $1 AS d FROM %s ORDER BY v <#> $1 LIMIT $2) s', tbl)
			INTO r USING q, n;
	ELSE
		SET LOCAL enable_indexscan = off;
		EXECUTE format('SELECT string_agg(id || '':'' || d, '','') FROM
			(SELECT id, v <#> $1 AS d FROM %s ORDER BY v <#> $1, ctid LIMIT $2) s', tbl)
			INTO r USING q, n;
	END IF;
	RETURN r;
END $$;
SELECT q, sp_rank('sp_enc', q, 100, true) = sp_rank('sp_enc', q, 100, false) AS same,
	sp_rank('sp_enc', q, 100, true) AS ranked
FROM unnest(ARRAY['{1:1,16777216:2}/16777216', '{3:1,2400:1,2401:1}/16777216',
				  '{129:1,2097152:-1}/16777216', '{16777215:1}/16777216']::spvec[]) q;

-- more dimensions than a store has lists (2^24): the service gives the
-- terms in use lists of their own; terms at the ends of spvec's range,
-- gaps of 2^28 and more (5-byte varints), rows indexed by the build and
-- by inserts, queries with terms no row has; ranked as a sequential scan
-- ranks them, after a REINDEX and after a VACUUM too
CREATE TABLE sp_wide (id int, v spvec(1000000000));
INSERT INTO sp_wide VALUES
	(1, '{1:1,268435457:2,536870913:3,805306369:4,1000000000:5}/1000000000'),
	(2, '{1000000000:1}/1000000000'), (3, '{}/1000000000');
INSERT INTO sp_wide SELECT i, spvec(array_agg(t ORDER BY t), array_agg((((t % 7) + 1) / 4.0)::real ORDER BY t),
	1000000000) FROM (SELECT DISTINCT i, ((i * 7919 + j * 104729) % 200) * 4999999 + 1 AS t
		FROM generate_series(4, 300) i, generate_series(1, 1 + i % 40) j) s GROUP BY i;
CREATE INDEX sp_wide_v ON sp_wide USING gpusparse (v);
INSERT INTO sp_wide SELECT i, spvec(ARRAY[(i % 200) * 4999999 + 1, 999999999],
	ARRAY[1, 0.5]::real[], 1000000000) FROM generate_series(301, 400) i;
CREATE TABLE sp_wide_q (q spvec);
INSERT INTO sp_wide_q VALUES ('{1:1,1000000000:1}/1000000000'),
	('{268435457:1,805306369:-1}/1000000000'), ('{5000000:1,999999999:2}/1000000000'),
	('{1:2,4:1,5000000:1,50000000:1}/1000000000'), ('{2:1,999999998:1}/1000000000'),
	('{}/1000000000');
INSERT INTO sp_wide_q SELECT spvec(ARRAY[(i * 37 % 200) * 4999999 + 1, (i * 91 % 200) * 4999999 + 1, 999999999],
	ARRAY[1, 2, 3]::real[], 1000000000) FROM generate_series(1, 20) i WHERE i * 37 % 200 < i * 91 % 200;
SELECT count(*) AS queries,
	count(*) FILTER (WHERE sp_rank('sp_wide', q, 20, true) = sp_rank('sp_wide', q, 20, false)) AS same
FROM sp_wide_q;
SELECT sp_rank('sp_wide', '{1:1,1000000000:1}/1000000000', 20, true) AS ranked;
SELECT sp_rank('sp_wide', '{2:1,999999998:1}/1000000000', 20, true) =
	sp_rank('sp_wide', '{2:1,999999998:1}/1000000000', 20, false) AS no_term_in_use;
SELECT dim FROM gpuindex_stats WHERE index_name = 'sp_wide_v';
REINDEX INDEX sp_wide_v;
SELECT count(*) FILTER (WHERE sp_rank('sp_wide', q, 20, true) = sp_rank('sp_wide', q, 20, false))
	AS same_after_reindex
FROM sp_wide_q;
DELETE FROM sp_wide WHERE id % 3 = 0;
VACUUM (INDEX_CLEANUP ON) sp_wide;
INSERT INTO sp_wide VALUES (1000, '{999999999:4,1000000000:4}/1000000000');
SELECT count(*) FILTER (WHERE sp_rank('sp_wide', q, 20, true) = sp_rank('sp_wide', q, 20, false))
	AS same_after_vacuum
FROM sp_wide_q;

-- an operator class must give an spvec
CREATE FUNCTION sp_bad_support(spvec) RETURNS real[] AS 'SELECT $1::real[]' LANGUAGE sql IMMUTABLE;
CREATE OPERATOR CLASS sp_bad_ops FOR TYPE spvec USING gpusparse AS
	OPERATOR 1 <#> (spvec, spvec) FOR ORDER BY float_ops,
	FUNCTION 1 sp_bad_support(spvec);
SELECT amvalidate(oid) FROM pg_opclass WHERE opcname = 'sp_bad_ops';

DROP TABLE sp_docs, sp_free, sp_big, sp_enc, sp_wide, sp_wide_q;
DROP FUNCTION sp_rank;
DROP FUNCTION sp_check, sp_batch_check, sp_random;
DROP OPERATOR CLASS sp_bad_ops USING gpusparse;
DROP FUNCTION sp_bad_support;
DROP EXTENSION gpuindex;
