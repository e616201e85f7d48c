--
-- gpuivf ordered scans against an independent reference: the same
-- queries answered by a sequential scan with the operators (the exact
-- answer), and the exact answer restricted to the probed lists, computed
-- in SQL from the index's centroids and list membership.
--
-- Data: 3000 points in 16 dimensions around 20 random centres (centres
-- uniform in [0,10), noise uniform in +-1.5 per coordinate, so that the
-- clusters overlap and 40 lists cut through them), and 50 query points
-- drawn the same way.  Everything is seeded.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;
SELECT setseed(0.5);

CREATE TABLE ivf_centres AS
SELECT c, array(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE c > 0) AS v
FROM generate_series(1, 20) c;

CREATE TABLE ivf_items (id int PRIMARY KEY, v real[]);
INSERT INTO ivf_items
SELECT i, array(SELECT (c.v[d] + 3 * (random() - 0.5))::real FROM generate_series(1, 16) d)
FROM generate_series(1, 3000) i JOIN ivf_centres c ON c.c = 1 + i % 20
ORDER BY i;

CREATE TABLE ivf_queries AS
SELECT q, array(SELECT (c.v[d] + 3 * (random() - 0.5))::real FROM generate_series(1, 16) d) AS v
FROM generate_series(1, 50) q JOIN ivf_centres c ON c.c = 1 + (q * 7) % 20
ORDER BY q;

-- exact top 10 of each query and metric, without any index
CREATE TABLE ivf_exact AS
SELECT q.q,
       array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v, i.id LIMIT 10) AS l2,
       array(SELECT i.id FROM ivf_items i ORDER BY i.v <#> q.v, i.id LIMIT 10) AS ip,
       array(SELECT i.id FROM ivf_items i ORDER BY i.v <=> q.v, i.id LIMIT 10) AS cos
FROM ivf_queries q;

-- mean overlap of two sets of top-10 arrays
CREATE FUNCTION ivf_recall(a int[], b int[]) RETURNS float8
LANGUAGE sql IMMUTABLE AS
$$ SELECT count(*)::float8 / 10 FROM (SELECT unnest(a) INTERSECT SELECT unnest(b)) s $$;

--
-- L2
--
CREATE INDEX ivf_items_l2 ON ivf_items USING gpuivf (v real_l2_ops) WITH (lists = 40);
SELECT * FROM gpuivf_index_info('ivf_items_l2');
SELECT rows, lists, dim, metric, state FROM gpuindex_stats WHERE indexrelid = 'ivf_items_l2'::regclass;
-- every row sits in exactly one list
SELECT count(*), count(DISTINCT ctid) FROM gpuivf_list_items('ivf_items_l2');

SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10)
FROM ivf_queries q;

-- the probed lists of each query: the nearest centroids
CREATE TABLE ivf_lists AS SELECT list, ctid AS tid FROM gpuivf_list_items('ivf_items_l2');
CREATE TABLE ivf_cents AS SELECT * FROM gpuivf_centroids('ivf_items_l2');

-- probes = 2 of 40: recall@10 is at least 0.95 ...
SET gpuivf.probes = 2;
CREATE TABLE ivf_got AS
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10) AS ids
FROM ivf_queries q;
SELECT avg(ivf_recall(g.ids, e.l2)) >= 0.95 AS recall_ok
FROM ivf_got g JOIN ivf_exact e USING (q);
-- ... and the answer is exactly the exact answer within the probed lists
SELECT count(*) AS mismatches
FROM ivf_got g JOIN ivf_queries q USING (q)
WHERE g.ids IS DISTINCT FROM array(
	SELECT i.id FROM ivf_items i JOIN ivf_lists l ON l.tid = i.ctid
	WHERE l.list IN (SELECT c.list FROM ivf_cents c ORDER BY c.centroid <-> q.v, c.list LIMIT 2)
	ORDER BY i.v <-> q.v, i.id LIMIT 10);
DROP TABLE ivf_got;

-- probes = 1: still exact within the one probed list
SET gpuivf.probes = 1;
CREATE TABLE ivf_got AS
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10) AS ids
FROM ivf_queries q;
SELECT count(*) AS mismatches
FROM ivf_got g JOIN ivf_queries q USING (q)
WHERE g.ids IS DISTINCT FROM array(
	SELECT i.id FROM ivf_items i JOIN ivf_lists l ON l.tid = i.ctid
	WHERE l.list = (SELECT c.list FROM ivf_cents c ORDER BY c.centroid <-> q.v, c.list LIMIT 1)
	ORDER BY i.v <-> q.v, i.id LIMIT 10);
-- (which is not the exact answer for every query: the check above is not
-- vacuous)
SELECT count(*) FILTER (WHERE g.ids IS DISTINCT FROM e.l2) > 0 AS some_differ,
       avg(ivf_recall(g.ids, e.l2)) < 1 AS recall_below_1
FROM ivf_got g JOIN ivf_exact e USING (q);
DROP TABLE ivf_got;

-- probes = lists: recall is exactly 1, the answer is the exact one
SET gpuivf.probes = 40;
CREATE TABLE ivf_got AS
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10) AS ids
FROM ivf_queries q;
SELECT avg(ivf_recall(g.ids, e.l2)) = 1 AS recall_is_1,
       count(*) FILTER (WHERE g.ids IS DISTINCT FROM e.l2) AS mismatches
FROM ivf_got g JOIN ivf_exact e USING (q);
DROP TABLE ivf_got;
-- probes beyond lists is the same as lists
SET gpuivf.probes = 1000;
SELECT count(*) AS mismatches
FROM ivf_queries q JOIN ivf_exact e USING (q)
WHERE e.l2 IS DISTINCT FROM
	array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10);

-- the distances the scan hands the executor are the operator's, in order
SET gpuivf.probes = 40;
SELECT bool_and(ok) AS ordered
FROM (SELECT d >= lag(d) OVER (ORDER BY n) OR lag(d) OVER (ORDER BY n) IS NULL AS ok
      FROM (SELECT row_number() OVER () AS n, i.v <-> q.v AS d
            FROM ivf_queries q, LATERAL (SELECT v FROM ivf_items ORDER BY v <-> q.v LIMIT 100) i
            WHERE q.q = 1) s) s2;
DROP TABLE ivf_lists, ivf_cents;
DROP INDEX ivf_items_l2;

--
-- Inner product
--
RESET enable_seqscan;
CREATE INDEX ivf_items_ip ON ivf_items USING gpuivf (v real_ip_ops) WITH (lists = 20);
SELECT * FROM gpuivf_index_info('ivf_items_ip');
SET enable_seqscan = off;
CREATE TABLE ivf_lists AS SELECT list, ctid AS tid FROM gpuivf_list_items('ivf_items_ip');
CREATE TABLE ivf_cents AS SELECT * FROM gpuivf_centroids('ivf_items_ip');
-- centroids of the spherical k-means have unit length
SELECT bool_and(abs(sqrt(inner_product(centroid, centroid)) - 1) < 1e-5) AS unit
FROM ivf_cents;
SET gpuivf.probes = 3;
CREATE TABLE ivf_got AS
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <#> q.v LIMIT 10) AS ids
FROM ivf_queries q;
SELECT count(*) AS mismatches
FROM ivf_got g JOIN ivf_queries q USING (q)
WHERE g.ids IS DISTINCT FROM array(
	SELECT i.id FROM ivf_items i JOIN ivf_lists l ON l.tid = i.ctid
	WHERE l.list IN (SELECT c.list FROM ivf_cents c ORDER BY c.centroid <#> q.v, c.list LIMIT 3)
	ORDER BY i.v <#> q.v, i.id LIMIT 10);
SELECT count(*) FILTER (WHERE g.ids IS DISTINCT FROM e.ip) > 0 AS some_differ
FROM ivf_got g JOIN ivf_exact e USING (q);
DROP TABLE ivf_got;
SET gpuivf.probes = 20;
SELECT count(*) AS mismatches
FROM ivf_queries q JOIN ivf_exact e USING (q)
WHERE e.ip IS DISTINCT FROM
	array(SELECT i.id FROM ivf_items i ORDER BY i.v <#> q.v LIMIT 10);
DROP TABLE ivf_lists, ivf_cents;
DROP INDEX ivf_items_ip;

--
-- Cosine
--
RESET enable_seqscan;
CREATE INDEX ivf_items_cos ON ivf_items USING gpuivf (v real_cosine_ops) WITH (lists = 20);
SELECT * FROM gpuivf_index_info('ivf_items_cos');
SET enable_seqscan = off;
CREATE TABLE ivf_lists AS SELECT list, ctid AS tid FROM gpuivf_list_items('ivf_items_cos');
CREATE TABLE ivf_cents AS SELECT * FROM gpuivf_centroids('ivf_items_cos');
SET gpuivf.probes = 1;
CREATE TABLE ivf_got AS
SELECT q.q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <=> q.v LIMIT 10) AS ids
FROM ivf_queries q;
SELECT count(*) AS mismatches
FROM ivf_got g JOIN ivf_queries q USING (q)
WHERE g.ids IS DISTINCT FROM array(
	SELECT i.id FROM ivf_items i JOIN ivf_lists l ON l.tid = i.ctid
	WHERE l.list IN (SELECT c.list FROM ivf_cents c ORDER BY c.centroid <=> q.v, c.list LIMIT 1)
	ORDER BY i.v <=> q.v, i.id LIMIT 10);
SELECT count(*) FILTER (WHERE g.ids IS DISTINCT FROM e.cos) > 0 AS some_differ
FROM ivf_got g JOIN ivf_exact e USING (q);
DROP TABLE ivf_got;
SET gpuivf.probes = 20;
SELECT count(*) AS mismatches
FROM ivf_queries q JOIN ivf_exact e USING (q)
WHERE e.cos IS DISTINCT FROM
	array(SELECT i.id FROM ivf_items i ORDER BY i.v <=> q.v LIMIT 10);
DROP TABLE ivf_lists, ivf_cents;
DROP INDEX ivf_items_cos;

--
-- Planner: ORDER BY ... LIMIT uses the index; a query that wants the
-- whole table in order does not, unless every list is probed
--
RESET enable_seqscan;
CREATE INDEX ivf_items_l2 ON ivf_items USING gpuivf (v) WITH (lists = 40);
ANALYZE ivf_items;
SET gpuivf.probes = 4;
EXPLAIN (COSTS OFF)
SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 10;
EXPLAIN (COSTS OFF)
SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}';
PREPARE ivf_knn(real[], int) AS SELECT id FROM ivf_items ORDER BY v <-> $1 LIMIT $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE ivf_knn('{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}', 10);
-- a NULL query gives no rows (like pgvector)
EXECUTE ivf_knn(NULL, 10);
-- bad queries
EXECUTE ivf_knn('{5,5}', 10);
EXECUTE ivf_knn('{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,NaN}', 10);
EXECUTE ivf_knn('{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,NULL}', 10);
RESET plan_cache_mode;
DEALLOCATE ivf_knn;
-- a pgvector habit: ivfflat.probes does nothing here, and a scan says so once
SELECT count(*) FROM (SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3) s;
SET ivfflat.probes = 10;
SELECT count(*) FROM (SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3) s;
SELECT count(*) FROM (SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3) s;
RESET ivfflat.probes;

-- Iterative scans: a filter that 10 rows of 3000 pass, in 10 clusters, one
-- probed list of 40.  Without iterating the scan stops at that list's rows; with
-- relaxed_order it probes more lists until the LIMIT is met (every
-- passing row, when it asks for all of them), each row once; max_probes
-- stops it at the rows of the lists it allows, computed in SQL from the
-- index's centroids and lists.
CREATE TABLE ivf_lists AS SELECT list, ctid AS tid FROM gpuivf_list_items('ivf_items_l2');
CREATE TABLE ivf_cents AS SELECT * FROM gpuivf_centroids('ivf_items_l2');
SET gpuivf.probes = 1;
SET gpuivf.scan_batch = 4;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_items WHERE id % 293 = 0
	ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 10;
SELECT count(*) < 10 AS short FROM (SELECT id FROM ivf_items WHERE id % 293 = 0
	ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 10) s;
SET gpuivf.iterative_scan = relaxed_order;
SELECT array_agg(id ORDER BY id) = (SELECT array_agg(id ORDER BY id) FROM ivf_items WHERE id % 293 = 0) AS all_rows,
	   count(*) = count(DISTINCT id) AS once
FROM (SELECT id FROM ivf_items WHERE id % 293 = 0
	  ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 10) s;
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM ivf_items WHERE id % 293 = 0
	ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 6) s;
-- the rows of an unfiltered scan come once each, all of them
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM ivf_items
	ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}') s;
SET gpuivf.max_probes = 3;
SELECT array_agg(id ORDER BY id) IS NOT DISTINCT FROM (
	SELECT array_agg(i.id ORDER BY i.id) FROM ivf_items i JOIN ivf_lists l ON l.tid = i.ctid
	WHERE i.id % 293 = 0 AND l.list IN (SELECT c.list FROM ivf_cents c
		ORDER BY c.centroid <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}', c.list LIMIT 3)) AS within_max_probes
FROM (SELECT id FROM ivf_items WHERE id % 293 = 0
	  ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 10) s;
SET ivfflat.iterative_scan = relaxed_order;
SELECT count(*) FROM (SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3) s;
RESET ivfflat.iterative_scan;
RESET gpuivf.max_probes;
RESET gpuivf.iterative_scan;
RESET gpuivf.scan_batch;
RESET enable_seqscan;
DROP TABLE ivf_lists, ivf_cents;
RESET gpuivf.probes;

-- The LIMIT above a scan sizes its first search (gpuindex.limit_hint; the
-- DEBUG line says how many rows a search asks for), never its rows: every
-- list probed, the answers are the exact ones of a sequential scan, with the
-- hint and without it, with an OFFSET, a LIMIT parameter and inside a
-- LATERAL join; a filter, or rows the scan finds dead, make it ask again.
SET enable_seqscan = off;
SET gpuivf.probes = 40;
SELECT count(*) FILTER (WHERE got = e.l2) AS exact, count(*) AS queries
FROM ivf_queries q JOIN ivf_exact e USING (q),
	LATERAL (SELECT array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 10) AS got) g;
SELECT count(*) FILTER (WHERE got = e.l2[4:10]) AS exact_offset
FROM ivf_queries q JOIN ivf_exact e USING (q),
	LATERAL (SELECT array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 7 OFFSET 3) AS got) g;
SET jit = off;
SET client_min_messages = debug1;
SELECT array_agg(id) FROM (SELECT id FROM ivf_items ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 3) s;
SELECT array_agg(id) FROM (SELECT id FROM ivf_items ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 3 OFFSET 2) s;
-- a LIMIT past ten batches: the first search asks for ten (1000), then it grows
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM ivf_items ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 2500) s;
PREPARE ivf_knn(real[], int) AS SELECT id FROM ivf_items ORDER BY v <-> $1 LIMIT $2;
SET plan_cache_mode = force_generic_plan;
SELECT count(*) FROM ivf_queries q WHERE q = 1 AND
	array(SELECT id FROM ivf_items ORDER BY v <-> q.v LIMIT 5) = (SELECT l2[1:5] FROM ivf_exact WHERE q = 1);
CREATE TEMP TABLE ivf_got AS EXECUTE ivf_knn('{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}', 4);
RESET plan_cache_mode;
DEALLOCATE ivf_knn;
SET enable_seqscan = on;
SET enable_indexscan = off;
SELECT (SELECT array_agg(id ORDER BY id) FROM ivf_got) =
	(SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM ivf_items
	 ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 4) s) AS exact_param;
RESET enable_indexscan;
SET enable_seqscan = off;
DROP TABLE ivf_got;
SELECT q, array(SELECT i.id FROM ivf_items i ORDER BY i.v <-> q.v LIMIT 2) = e.l2[1:2] AS exact
FROM ivf_queries q JOIN ivf_exact e USING (q) WHERE q <= 2 ORDER BY q;
SELECT count(*) FROM (SELECT id FROM ivf_items WHERE id % 2 = 0
	ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 3) s;
-- two scans of one index in a plan: the same LIMIT sizes both, different ones neither
SELECT count(*) FROM (
	(SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3)
	UNION ALL
	(SELECT id FROM ivf_items ORDER BY v <-> '{1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1}' LIMIT 3)) s;
SELECT count(*) FROM (
	(SELECT id FROM ivf_items ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3)
	UNION ALL
	(SELECT id FROM ivf_items ORDER BY v <-> '{1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1}' LIMIT 4)) s;
-- a partitioned table: the LIMIT above the Merge Append sizes each partition's scan
SET client_min_messages = notice;
CREATE TABLE ivf_parts (id int, v real[]) PARTITION BY RANGE (id);
CREATE TABLE ivf_parts_a PARTITION OF ivf_parts FOR VALUES FROM (1) TO (1501);
CREATE TABLE ivf_parts_b PARTITION OF ivf_parts FOR VALUES FROM (1501) TO (3001);
INSERT INTO ivf_parts SELECT id, v FROM ivf_items;
CREATE INDEX ivf_parts_v ON ivf_parts USING gpuivf (v) WITH (lists = 10);
EXPLAIN (COSTS OFF) SELECT id FROM ivf_parts ORDER BY v <-> '{5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5}' LIMIT 3;
SET client_min_messages = debug1;
SELECT array_agg(id) = (SELECT l2[1:3] FROM ivf_exact WHERE q = 1) AS exact
FROM (SELECT id FROM ivf_parts ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 3) s;
DROP TABLE ivf_parts;
SET gpuindex.limit_hint = off;
SELECT array_agg(id) FROM (SELECT id FROM ivf_items ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 3) s;
RESET gpuindex.limit_hint;
-- the 8 nearest rows dead to this snapshot, still in the index: LIMIT 3 asks for 3, 6, 12
BEGIN;
DELETE FROM ivf_items WHERE id = ANY ((SELECT l2[1:8] FROM ivf_exact WHERE q = 1)::int[]);
SELECT array_agg(id) = (SELECT l2[9:10] FROM ivf_exact WHERE q = 1) AS next_exact
FROM (SELECT id FROM ivf_items ORDER BY v <-> (SELECT v FROM ivf_queries WHERE q = 1) LIMIT 2) s;
ROLLBACK;
RESET client_min_messages;
RESET jit;
RESET gpuivf.probes;
RESET enable_seqscan;

DROP TABLE ivf_exact, ivf_queries, ivf_centres, ivf_items;
DROP FUNCTION ivf_recall(int[], int[]);
SELECT count(*) FROM gpuindex_stats WHERE index_name LIKE 'ivf\_%';
-- leave the database as the next test expects it
DROP EXTENSION gpuindex;
