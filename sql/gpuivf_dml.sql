--
-- gpuivf under INSERT, DELETE, UPDATE and VACUUM: the index answers like a
-- sequential scan (counts and orders checked against one), the device
-- store follows (gpuindex_stats), scans continue past their first batch,
-- and REINDEX, TRUNCATE and DROP leave no stale store behind.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;
SELECT setseed(0.25);

-- (no autovacuum: the test decides when VACUUM runs)
CREATE TABLE ivf_dml (id int PRIMARY KEY, v real[]) WITH (autovacuum_enabled = off);
INSERT INTO ivf_dml
SELECT i, array(SELECT random()::real FROM generate_series(1, 4) WHERE i > 0)
FROM generate_series(1, 1000) i;
CREATE INDEX ivf_dml_v ON ivf_dml USING gpuivf (v) WITH (lists = 8);

-- the whole table in index order (probes = lists) vs a sequential scan
CREATE FUNCTION ivf_dml_check(q real[]) RETURNS TABLE(same_rows bool, same_order bool, n bigint)
LANGUAGE plpgsql AS $$
DECLARE
	got int[];
	want int[];
BEGIN
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_indexscan = on;
	SET LOCAL gpuivf.probes = 8;
	got := array(SELECT id FROM (SELECT id FROM ivf_dml ORDER BY v <-> q LIMIT 100000) s);
	SET LOCAL enable_seqscan = on;
	SET LOCAL enable_indexscan = off;
	want := array(SELECT id FROM ivf_dml WHERE v IS NOT NULL ORDER BY v <-> q, id);
	RETURN QUERY SELECT
		(SELECT array_agg(x ORDER BY x) FROM unnest(got) x) = (SELECT array_agg(x ORDER BY x) FROM unnest(want) x),
		got = want,
		cardinality(got)::bigint;
END $$;

CREATE FUNCTION ivf_dml_store() RETURNS TABLE(rows bigint, table_rows bigint)
LANGUAGE sql AS $$
	SELECT (SELECT rows FROM gpuindex_stats WHERE indexrelid = 'ivf_dml_v'::regclass),
	       (SELECT count(*) FROM ivf_dml WHERE v IS NOT NULL)
$$;

SELECT * FROM ivf_dml_check('{0.5,0.5,0.5,0.5}');
SELECT * FROM ivf_dml_store();

-- a session sees its own uncommitted rows, before and after the flush
BEGIN;
INSERT INTO ivf_dml VALUES (1001, '{0.5,0.5,0.5,0.5}'), (1002, '{0.5,0.5,0.5,0.51}');
SET LOCAL enable_seqscan = off;
SELECT id FROM ivf_dml ORDER BY v <-> '{0.5,0.5,0.5,0.5}' LIMIT 2;
SELECT * FROM ivf_dml_check('{0.5,0.5,0.5,0.5}');
COMMIT;
SELECT * FROM ivf_dml_store();

-- rolled back rows are in the pages but never visible
BEGIN;
INSERT INTO ivf_dml SELECT i, '{0.5,0.5,0.5,0.5}' FROM generate_series(2001, 2100) i;
ROLLBACK;
SELECT * FROM ivf_dml_check('{0.5,0.5,0.5,0.5}');
SELECT count(*) FROM gpuivf_list_items('ivf_dml_v');

-- deleted rows stay in the index until VACUUM; scans must cope
DELETE FROM ivf_dml WHERE id % 3 = 0;
SELECT * FROM ivf_dml_check('{0.1,0.9,0.1,0.9}');
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM ivf_dml ORDER BY v <-> '{0.1,0.9,0.1,0.9}' LIMIT 50) s;
RESET enable_seqscan;
VACUUM (INDEX_CLEANUP ON) ivf_dml;
SELECT * FROM ivf_dml_store();
SELECT count(*) FROM gpuivf_list_items('ivf_dml_v');
SELECT * FROM ivf_dml_check('{0.1,0.9,0.1,0.9}');
-- the store never held the 100 rolled back rows: 334 deletes
SELECT inserts, deletes FROM gpuindex_stats WHERE indexrelid = 'ivf_dml_v'::regclass;

-- UPDATE of the vector: a new index entry; the old one dies
UPDATE ivf_dml SET v = '{0.9,0.9,0.9,0.9}' WHERE id = 1;
SET enable_seqscan = off;
SELECT id, v <-> '{0.9,0.9,0.9,0.9}' AS dist FROM ivf_dml ORDER BY v <-> '{0.9,0.9,0.9,0.9}' LIMIT 1;
RESET enable_seqscan;
SELECT * FROM ivf_dml_check('{0.9,0.9,0.9,0.9}');

-- NULL vectors: not indexed, not returned by the index
INSERT INTO ivf_dml VALUES (3001, NULL), (3002, NULL);
UPDATE ivf_dml SET v = NULL WHERE id = 2;
VACUUM ivf_dml;
SELECT * FROM ivf_dml_check('{0.2,0.2,0.2,0.2}');
SELECT * FROM ivf_dml_store();

-- a sliding window: delete the oldest 100 of 400 rows, VACUUM, insert 100;
-- VACUUM points each list's insert page back at its first page with room
-- and the store reuses freed slabs, so neither grows (64 dimensions: 30
-- rows a page, so without reuse every round would add pages)
SELECT setseed(0.75);
CREATE TABLE ivf_slide (id int, v real[]) WITH (autovacuum_enabled = off);
INSERT INTO ivf_slide
SELECT i, array(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 400) i;
CREATE INDEX ivf_slide_v ON ivf_slide USING gpuivf (v) WITH (lists = 2);
SELECT pg_relation_size('ivf_slide_v') AS size0 \gset
SELECT bytes AS bytes0 FROM gpuindex_stats WHERE indexrelid = 'ivf_slide_v'::regclass \gset
DELETE FROM ivf_slide WHERE id <= 100;
VACUUM ivf_slide;
INSERT INTO ivf_slide
SELECT 400 + i, array(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 100) i;
DELETE FROM ivf_slide WHERE id <= 200;
VACUUM ivf_slide;
INSERT INTO ivf_slide
SELECT 500 + i, array(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 100) i;
DELETE FROM ivf_slide WHERE id <= 300;
VACUUM ivf_slide;
INSERT INTO ivf_slide
SELECT 600 + i, array(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 100) i;
DELETE FROM ivf_slide WHERE id <= 400;
VACUUM ivf_slide;
INSERT INTO ivf_slide
SELECT 700 + i, array(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 100) i;
SELECT pg_relation_size('ivf_slide_v') = :size0 AS pages_reused;
SELECT bytes <= :bytes0 AS slabs_reused, rows
FROM gpuindex_stats WHERE indexrelid = 'ivf_slide_v'::regclass;
SELECT count(*) FROM gpuivf_list_items('ivf_slide_v');
DROP TABLE ivf_slide;
SELECT * FROM ivf_dml_store();
SELECT * FROM ivf_dml_check('{0.3,0.6,0.3,0.6}');

--
-- Iterative scans: a first batch of 3 rows, then 6, 12, ...
--
SET gpuivf.scan_batch = 3;
SET enable_seqscan = off;
-- a LIMIT far beyond the first batch: the exact order
SET gpuivf.probes = 8;
SELECT array(SELECT id FROM ivf_dml ORDER BY v <-> '{0.7,0.2,0.7,0.2}' LIMIT 200)
     = array(SELECT id FROM (SELECT id, v <-> '{0.7,0.2,0.7,0.2}' AS d FROM ivf_dml
                             WHERE v IS NOT NULL ORDER BY d, id LIMIT 200) s) AS same;
-- a filter that rejects most rows: every matching row comes back
SELECT count(*) FROM (SELECT id FROM ivf_dml WHERE id % 50 = 7 ORDER BY v <-> '{0.7,0.2,0.7,0.2}' LIMIT 1000) s;
SELECT count(*) FROM ivf_dml WHERE id % 50 = 7 AND v IS NOT NULL;
-- with fewer probes: exactly the matching rows of the probed lists
SET gpuivf.probes = 2;
CREATE TABLE ivf_dml_lists AS SELECT list, ctid AS tid FROM gpuivf_list_items('ivf_dml_v');
SELECT array(SELECT id FROM ivf_dml WHERE id % 5 = 1 ORDER BY v <-> '{0.7,0.2,0.7,0.2}' LIMIT 1000)
     = array(SELECT d.id FROM ivf_dml d JOIN ivf_dml_lists l ON l.tid = d.ctid
             WHERE d.id % 5 = 1 AND l.list IN (
                 SELECT list FROM gpuivf_centroids('ivf_dml_v')
                 ORDER BY centroid <-> '{0.7,0.2,0.7,0.2}', list LIMIT 2)
             ORDER BY d.v <-> '{0.7,0.2,0.7,0.2}', d.id) AS same;
DROP TABLE ivf_dml_lists;
-- rows deleted by this transaction are invisible: the scan goes on past them
BEGIN;
DELETE FROM ivf_dml WHERE id % 2 = 0;
SET LOCAL gpuivf.probes = 8;
SELECT array(SELECT id FROM ivf_dml ORDER BY v <-> '{0.7,0.2,0.7,0.2}' LIMIT 150)
     = array(SELECT id FROM (SELECT id, v <-> '{0.7,0.2,0.7,0.2}' AS d FROM ivf_dml
                             WHERE v IS NOT NULL ORDER BY d, id LIMIT 150) s) AS same;
ROLLBACK;
RESET gpuivf.scan_batch;
RESET gpuivf.probes;
RESET enable_seqscan;

-- a cursor reads the index scan incrementally
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL gpuivf.scan_batch = 2;
DECLARE c CURSOR FOR SELECT id FROM ivf_dml ORDER BY v <-> '{0.5,0.5,0.5,0.5}' LIMIT 20;
FETCH 3 FROM c;
FETCH 3 FROM c;
CLOSE c;
COMMIT;
SET enable_seqscan = off;
SELECT id FROM ivf_dml ORDER BY v <-> '{0.5,0.5,0.5,0.5}' LIMIT 6;
RESET enable_seqscan;

--
-- The store follows the pages' identity: REINDEX and TRUNCATE give new
-- pages and a new store, DROP forgets it
--
SELECT relfilenode AS fn0 FROM pg_class WHERE relname = 'ivf_dml_v' \gset
REINDEX INDEX ivf_dml_v;
SELECT count(*) AS stores,
       bool_and(s.relfilenode = c.relfilenode) AS current,
       bool_and(s.relfilenode <> :fn0) AS new_pages
FROM gpuindex_stats s JOIN pg_class c ON c.oid = s.indexrelid
WHERE s.indexrelid = 'ivf_dml_v'::regclass;
SELECT * FROM ivf_dml_store();
SELECT * FROM ivf_dml_check('{0.5,0.5,0.5,0.5}');
-- VACUUM FULL rewrites the table and rebuilds the index
VACUUM FULL ivf_dml;
SELECT count(*) AS stores, bool_and(s.relfilenode = c.relfilenode) AS current
FROM gpuindex_stats s JOIN pg_class c ON c.oid = s.indexrelid
WHERE s.indexrelid = 'ivf_dml_v'::regclass;
SELECT * FROM ivf_dml_check('{0.5,0.5,0.5,0.5}');
-- TRUNCATE leaves an empty index: no store at all
TRUNCATE ivf_dml;
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = 'ivf_dml_v'::regclass;
SELECT * FROM gpuivf_index_info('ivf_dml_v');
INSERT INTO ivf_dml VALUES (1, '{1,1,1,1}'), (2, '{2,2,2,2}');
SELECT * FROM ivf_dml_check('{1.2,1.2,1.2,1.2}');
SELECT * FROM ivf_dml_store();
-- TRUNCATE rolled back: the old pages come back, and so does their store
BEGIN;
TRUNCATE ivf_dml;
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = 'ivf_dml_v'::regclass;
ROLLBACK;
SELECT * FROM ivf_dml_check('{1.2,1.2,1.2,1.2}');
SELECT * FROM ivf_dml_store();
-- a CREATE INDEX that rolls back leaves no store behind (it is dropped at
-- this session's next gpuivf scan)
BEGIN;
CREATE INDEX ivf_dml_tx ON ivf_dml USING gpuivf (v real_ip_ops) WITH (lists = 1);
SELECT 'ivf_dml_tx'::regclass::oid AS txoid \gset
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = :txoid;
ROLLBACK;
SELECT * FROM ivf_dml_check('{1.2,1.2,1.2,1.2}');
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = :txoid;
-- DROP INDEX and DROP TABLE
CREATE INDEX ivf_dml_v2 ON ivf_dml USING gpuivf (v real_cosine_ops) WITH (lists = 1);
SELECT count(*) FROM gpuindex_stats WHERE index_name IN ('ivf_dml_v', 'ivf_dml_v2');
DROP INDEX ivf_dml_v2;
SELECT count(*) FROM gpuindex_stats WHERE index_name IN ('ivf_dml_v', 'ivf_dml_v2');
SELECT 'ivf_dml_v'::regclass::oid AS ivfoid \gset
DROP TABLE ivf_dml;
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = :ivfoid;
DROP FUNCTION ivf_dml_check(real[]);
DROP FUNCTION ivf_dml_store();
-- float extremes: vectors whose distances would overflow or underflow single
-- precision are refused (rows would tie where a sequential scan in double
-- orders them); within the bounds the index orders as the scan
CREATE TABLE ivf_ext (id int, v real[]);
CREATE INDEX ivf_ext_l2 ON ivf_ext USING gpuivf (v real_l2_ops) WITH (lists = 1);
CREATE INDEX ivf_ext_ip ON ivf_ext USING gpuivf (v real_ip_ops) WITH (lists = 1);
INSERT INTO ivf_ext VALUES (1, '{1e19,0}');
INSERT INTO ivf_ext VALUES (2, '{1e-24,0}');
INSERT INTO ivf_ext VALUES (3, '{9e18,0}'), (4, '{2e-19,0}'), (5, '{0,0}'), (6, '{-9e18,0}');
SET enable_seqscan = off;
SELECT id FROM ivf_ext ORDER BY v <-> '{1e20,0}' LIMIT 3;
SELECT id FROM ivf_ext ORDER BY v <#> '{1e-30,0}' LIMIT 3;
SELECT count(*) FROM gpuivf_search('ivf_ext_l2', '{{1e20,0}}', 3);
SELECT array_agg(id ORDER BY n) FROM (SELECT id, row_number() OVER () n FROM
  (SELECT id FROM ivf_ext ORDER BY v <-> '{1,0}' LIMIT 4) s) x;
RESET enable_seqscan;
SELECT array_agg(id ORDER BY v <-> '{1,0}', id) FROM ivf_ext;
DROP TABLE ivf_ext;
CREATE TABLE ivf_ext (id int, v real[]);
CREATE INDEX ivf_ext_cos ON ivf_ext USING gpuivf (v real_cosine_ops) WITH (lists = 1);
INSERT INTO ivf_ext VALUES (0, '{1e30,1}');
INSERT INTO ivf_ext SELECT i, ARRAY[1e18, (31 - i) * 1e17]::real[] FROM generate_series(1, 30) i;
INSERT INTO ivf_ext VALUES (31, '{1e-18,1e-20}');
SET enable_seqscan = off;
SELECT array_agg(id) AS by_index FROM (SELECT id FROM ivf_ext ORDER BY v <=> '{1e18,1e-18}' LIMIT 31) s;
RESET enable_seqscan;
SELECT array_agg(id ORDER BY v <=> '{1e18,1e-18}', id) AS by_scan FROM ivf_ext;
DROP TABLE ivf_ext;
-- leave the database as the next test expects it
DROP EXTENSION gpuindex;
