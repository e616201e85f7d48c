--
-- gpuivf with quantizer = 'pq' (IVF-PQ): options, search against a
-- sequential scan (exact with every list probed and re-ranking on; a
-- recall floor without re-ranking), DML, the batch API and the codebook
-- and code functions.
--
-- Data: 2000 points in 16 dimensions around 20 random centres (noise
-- uniform in +-1.5 per coordinate), 20 queries drawn the same way, all
-- seeded.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;
SELECT setseed(0.25);

CREATE TABLE pq_centres AS
SELECT c, array(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE c > 0) AS v
FROM generate_series(1, 20) c;

CREATE TABLE pq_items (id int PRIMARY KEY, v real[]);
INSERT INTO pq_items
SELECT i, array(SELECT (c.v[d] + 3 * (random() - 0.5))::real FROM generate_series(1, 16) d)
FROM generate_series(1, 2000) i JOIN pq_centres c ON c.c = 1 + i % 20
ORDER BY i;

CREATE TABLE pq_queries AS
SELECT q, array(SELECT (c.v[d] + 3 * (random() - 0.5))::real FROM generate_series(1, 16) d) AS v
FROM generate_series(1, 20) q JOIN pq_centres c ON c.c = 1 + (q * 7) % 20
ORDER BY q;

CREATE FUNCTION pq_recall(a int[], b int[]) RETURNS float8
LANGUAGE sql IMMUTABLE AS
$$ SELECT count(*)::float8 / 10 FROM (SELECT unnest(a) INTERSECT SELECT unnest(b)) s $$;

-- exact top 10 of each query, without any index
CREATE TABLE pq_exact AS
SELECT q.q,
       array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v, i.id LIMIT 10) AS l2,
       array(SELECT i.id FROM pq_items i ORDER BY i.v <#> q.v, i.id LIMIT 10) AS ip,
       array(SELECT i.id FROM pq_items i ORDER BY i.v <=> q.v, i.id LIMIT 10) AS cos
FROM pq_queries q;

--
-- options
--
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'opq');
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_bits = 9);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_bits = 3);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_m = 0);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_m = 5);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_m = 32);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (pq_m = 4);
CREATE INDEX pq_bad ON pq_items USING gpuivf (v real_l2_ops) WITH (quantizer = 'flat', pq_bits = 8);
SET gpuivf.pq_rerank = -1;
SET gpuivf.pq_rerank = 1001;

--
-- L2, default sub-spaces (dim / 2 = 8) and 256 entries
--
CREATE INDEX pq_l2 ON pq_items USING gpuivf (v real_l2_ops) WITH (lists = 10, quantizer = 'pq');
SELECT * FROM gpuivf_index_info('pq_l2');
SELECT rows, lists, dim, metric, kind, payload_bytes / rows AS record_bytes
FROM gpuindex_stats WHERE indexrelid = 'pq_l2'::regclass;
SELECT count(*) AS entries, count(DISTINCT subspace) AS subspaces,
       min(array_length(centroid, 1)) AS dsub FROM gpuivf_pq_codebooks('pq_l2');
SELECT count(*) AS rows, min(array_length(code, 1)) AS m,
       min(c) >= 0 AND max(c) < 256 AS codes_in_range
FROM gpuivf_pq_codes('pq_l2'), unnest(code) c;

SET enable_seqscan = off;
SET gpuivf.probes = 10;
EXPLAIN (COSTS OFF) SELECT id FROM pq_items ORDER BY v <-> '{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}' LIMIT 10;

-- without re-ranking: recall of the code distances against the exact answer
SET gpuivf.pq_rerank = 0;
SELECT avg(pq_recall(e.l2, array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v LIMIT 10))) >= 0.8
       AS recall_ok
FROM pq_queries q JOIN pq_exact e USING (q);

-- with re-ranking and every list probed: the exact top 10, in order
SET gpuivf.pq_rerank = 10;
SELECT count(*) AS queries,
       count(*) FILTER (WHERE e.l2 = array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
-- the distances handed back are the exact ones
SELECT bool_and(abs(d - (v <-> (SELECT v FROM pq_queries WHERE q = 1))) < 1e-5) AS exact_distances
FROM (SELECT v, v <-> (SELECT v FROM pq_queries WHERE q = 1) AS d FROM pq_items
      ORDER BY v <-> (SELECT v FROM pq_queries WHERE q = 1) LIMIT 10) s;

-- more rows than one group (gpuivf.scan_batch * pq_rerank): every row once
SET gpuivf.scan_batch = 5;
SET gpuivf.pq_rerank = 2;
SELECT count(*), count(DISTINCT id) FROM
  (SELECT id FROM pq_items ORDER BY v <-> (SELECT v FROM pq_queries WHERE q = 2) LIMIT 100) s;
RESET gpuivf.scan_batch;

--
-- JUNO's selective search and its hit counts: settings, then against the
-- exact answer (every list probed): a recall floor by codes alone, the
-- exact top 10 with re-ranking
--
SET gpuivf.pq_search = 'opq';
SET gpuivf.pq_select = 12;
SET gpuivf.pq_select = 512;
SET gpuivf.pq_threshold_scale = 0;
SET gpuivf.pq_search = 'juno';
SET gpuivf.pq_rerank = 0;
SELECT avg(pq_recall(e.l2, array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v LIMIT 10))) >= 0.6
       AS recall_ok
FROM pq_queries q JOIN pq_exact e USING (q);
SET gpuivf.pq_rerank = 10;
SELECT count(*) AS queries,
       count(*) FILTER (WHERE e.l2 = array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
-- one entry a sub-space, a narrow threshold: still every row comes once
SET gpuivf.pq_select = 1;
SET gpuivf.pq_threshold_scale = 0.1;
SELECT count(*), count(DISTINCT id) FROM
  (SELECT id FROM pq_items ORDER BY v <-> (SELECT v FROM pq_queries WHERE q = 3) LIMIT 100) s;
RESET gpuivf.pq_select;
RESET gpuivf.pq_threshold_scale;
SET gpuivf.pq_search = 'hits';
SET gpuivf.pq_select = 32;
SELECT count(*) FILTER (WHERE e.l2 = array(SELECT i.id FROM pq_items i ORDER BY i.v <-> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
SELECT count(*) AS hits, count(DISTINCT query) AS queries
FROM gpuivf_search('pq_l2', (SELECT array_agg(v ORDER BY q) FROM pq_queries WHERE q <= 5), 10);
RESET gpuivf.pq_select;
RESET gpuivf.pq_search;

--
-- inner product (16 sub-spaces of 16 entries) and cosine
--
SET gpuivf.pq_rerank = 0;
CREATE INDEX pq_ip ON pq_items USING gpuivf (v real_ip_ops)
	WITH (lists = 10, quantizer = 'pq', pq_m = 16, pq_bits = 4);
SELECT count(*) AS entries FROM gpuivf_pq_codebooks('pq_ip');
-- 16 codes of 4 bits, two a byte: 8 bytes a record, every code below 16
SELECT count(*) AS codes, min(array_length(code, 1)) AS m,
       min(c) >= 0 AND max(c) < 16 AS codes_in_range, count(DISTINCT c) AS distinct_codes
FROM gpuivf_pq_codes('pq_ip'), unnest(code) c;
SELECT avg(pq_recall(e.ip, array(SELECT i.id FROM pq_items i ORDER BY i.v <#> q.v LIMIT 10))) >= 0.7
       AS recall_ok
FROM pq_queries q JOIN pq_exact e USING (q);
SELECT payload_bytes / rows AS record_bytes FROM gpuindex_stats WHERE indexrelid = 'pq_ip'::regclass;
SET gpuivf.pq_rerank = 20;
SELECT count(*) FILTER (WHERE e.ip = array(SELECT i.id FROM pq_items i ORDER BY i.v <#> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
SET gpuivf.pq_search = 'juno';
SELECT count(*) FILTER (WHERE e.ip = array(SELECT i.id FROM pq_items i ORDER BY i.v <#> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
RESET gpuivf.pq_search;
DROP INDEX pq_ip;

SET gpuivf.pq_rerank = 0;
CREATE INDEX pq_cos ON pq_items USING gpuivf (v real_cosine_ops) WITH (lists = 10, quantizer = 'pq');
SELECT avg(pq_recall(e.cos, array(SELECT i.id FROM pq_items i ORDER BY i.v <=> q.v LIMIT 10))) >= 0.4
       AS recall_ok
FROM pq_queries q JOIN pq_exact e USING (q);
SET gpuivf.pq_rerank = 10;
SELECT count(*) FILTER (WHERE e.cos = array(SELECT i.id FROM pq_items i ORDER BY i.v <=> q.v LIMIT 10)) AS exact
FROM pq_queries q JOIN pq_exact e USING (q);
DROP INDEX pq_cos;

-- re-ranking reads an expression index's value as the index computed it
SET gpuivf.pq_rerank = 10;
CREATE INDEX pq_expr ON pq_items USING gpuivf ((v[1:8]) real_l2_ops)
	WITH (lists = 10, quantizer = 'pq', pq_m = 4);
SELECT count(*) FILTER (WHERE array(SELECT i.id FROM pq_items i ORDER BY i.v[1:8] <-> q.v[1:8] LIMIT 10)
                            = array(SELECT i.id FROM pq_items i ORDER BY l2_distance(i.v[1:8], q.v[1:8]), i.id LIMIT 10))
       AS exact
FROM pq_queries q;
EXPLAIN (COSTS OFF) SELECT id FROM pq_items ORDER BY v[1:8] <-> '{1,2,3,4,5,6,7,8}' LIMIT 10;
DROP INDEX pq_expr;

--
-- DML: a new row is found, a deleted one is gone after VACUUM
--
SET gpuivf.pq_rerank = 10;
INSERT INTO pq_items VALUES (5001, '{50,50,50,50,50,50,50,50,50,50,50,50,50,50,50,50}');
SELECT id FROM pq_items ORDER BY v <-> '{50,50,50,50,50,50,50,50,50,50,50,50,50,50,50,50}' LIMIT 1;
SELECT count(*) FROM gpuivf_pq_codes('pq_l2') WHERE ctid = (SELECT ctid FROM pq_items WHERE id = 5001);
DELETE FROM pq_items WHERE id = 5001;
VACUUM pq_items;
SELECT id FROM pq_items ORDER BY v <-> '{50,50,50,50,50,50,50,50,50,50,50,50,50,50,50,50}' LIMIT 1;
SELECT rows FROM gpuindex_stats WHERE indexrelid = 'pq_l2'::regclass;
SELECT count(*) FROM gpuivf_pq_codes('pq_l2');

--
-- the batch API: code distances, nearest first, 10 per query
--
SET gpuivf.pq_rerank = 0;
SELECT count(*) AS hits, count(DISTINCT query) AS queries
FROM gpuivf_search('pq_l2', (SELECT array_agg(v ORDER BY q) FROM pq_queries WHERE q <= 5), 10);
-- nearest first within each query
SELECT bool_and(ordered) AS nearest_first FROM
  (SELECT distance >= lag(distance, 1, '-Infinity') OVER (PARTITION BY query ORDER BY n) AS ordered
   FROM gpuivf_search('pq_l2', (SELECT array_agg(v ORDER BY q) FROM pq_queries), 10)
        WITH ORDINALITY r(query, ctid, distance, n)) s;
SELECT avg(pq_recall(e.l2, r.ids)) >= 0.8 AS batch_recall_ok
FROM (SELECT query, array_agg(i.id) AS ids
      FROM gpuivf_search('pq_l2', (SELECT array_agg(v ORDER BY q) FROM pq_queries), 10) s
      JOIN pq_items i ON i.ctid = s.ctid GROUP BY query) r
JOIN pq_exact e ON e.q = r.query;
-- with re-ranking: the exact top 10 of each query, with exact distances
SET gpuivf.pq_rerank = 10;
SELECT count(*) FILTER (WHERE e.l2 = r.ids) AS exact, bool_and(r.dist_ok) AS exact_distances
FROM (SELECT query, array_agg(i.id ORDER BY n) AS ids,
             bool_and(abs(s.distance - (i.v <-> q.v)) < 1e-5) AS dist_ok
      FROM gpuivf_search('pq_l2', (SELECT array_agg(v ORDER BY q) FROM pq_queries), 10)
           WITH ORDINALITY s(query, ctid, distance, n)
      JOIN pq_items i ON i.ctid = s.ctid JOIN pq_queries q ON q.q = s.query
      GROUP BY query) r
JOIN pq_exact e ON e.q = r.query;
-- rows deleted but not vacuumed are candidates the snapshot does not see
BEGIN;
DELETE FROM pq_items WHERE id IN (SELECT unnest(l2[1:5]) FROM pq_exact WHERE q = 1);
SELECT count(*) AS hits, count(DISTINCT s.ctid) AS distinct_rows,
       bool_and(i.id IS NOT NULL) AS all_visible
FROM gpuivf_search('pq_l2', (SELECT v FROM pq_queries WHERE q = 1), 10) s
LEFT JOIN pq_items i ON i.ctid = s.ctid;
-- one candidate per row: the search asks again for more candidates
SET gpuivf.pq_rerank = 1;
SELECT count(*) AS hits, count(DISTINCT s.ctid) AS distinct_rows,
       bool_and(i.id IS NOT NULL) AS all_visible
FROM gpuivf_search('pq_l2', (SELECT v FROM pq_queries WHERE q = 1), 10) s
LEFT JOIN pq_items i ON i.ctid = s.ctid;
ROLLBACK;

-- an index built on an empty table takes rows (searchable, codebooks untrained)
CREATE TABLE pq_empty (id int, v real[]);
CREATE INDEX ON pq_empty USING gpuivf (v real_l2_ops) WITH (quantizer = 'pq', pq_m = 2);
INSERT INTO pq_empty VALUES (1, '{1,2,3,4}'), (2, '{5,6,7,8}');
SELECT id FROM pq_empty ORDER BY v <-> '{5,6,7,8}' LIMIT 1;
DROP TABLE pq_empty;

-- the codebooks and codes are for those who may read the whole table
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_gpuindex_pq_reader;
CREATE ROLE regress_gpuindex_pq_reader;
RESET client_min_messages;
SET ROLE regress_gpuindex_pq_reader;
SELECT count(*) FROM gpuivf_pq_codebooks('pq_l2');
SELECT count(*) FROM gpuivf_pq_codes('pq_l2');
RESET ROLE;
GRANT SELECT ON pq_items TO regress_gpuindex_pq_reader;
SET ROLE regress_gpuindex_pq_reader;
SELECT count(*) FROM gpuivf_pq_codebooks('pq_l2');
SELECT count(*) FROM gpuivf_pq_codes('pq_l2');
RESET ROLE;
ALTER TABLE pq_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY pq_none ON pq_items FOR SELECT USING (false);
SET ROLE regress_gpuindex_pq_reader;
SELECT count(*) FROM gpuivf_pq_codebooks('pq_l2');
SELECT count(*) FROM gpuivf_pq_codes('pq_l2');
RESET ROLE;
ALTER TABLE pq_items DISABLE ROW LEVEL SECURITY;
DROP POLICY pq_none ON pq_items;
REVOKE SELECT ON pq_items FROM regress_gpuindex_pq_reader;
DROP ROLE regress_gpuindex_pq_reader;

-- a flat index refuses the pq functions
CREATE INDEX pq_flat ON pq_items USING gpuivf (v real_l2_ops) WITH (lists = 10);
SELECT * FROM gpuivf_pq_codebooks('pq_flat');
DROP INDEX pq_flat;

RESET enable_seqscan;
RESET gpuivf.probes;
RESET gpuivf.pq_rerank;
DROP TABLE pq_items, pq_queries, pq_exact, pq_centres;
DROP FUNCTION pq_recall;
