-- gpuindex demo: run by demo/run-demo.sh (psql variable :rows)
\pset footer off
\timing off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;

\echo '== operators on real[] (pgvector conventions)'
SELECT '{1,2,3}'::real[] <-> '{4,6,8}'::real[] AS l2_distance,
       '{1,2,3}'::real[] <#> '{4,6,8}'::real[] AS negative_inner_product,
       '{1,0}'::real[] <=> '{0,1}'::real[] AS cosine_distance;

\echo '== the device service'
SELECT pid, backend, device FROM gpuindex_service();
SELECT round(gpuindex_ping_bench(20000)::numeric, 2) AS round_trip_us_back_to_back,
       round(gpuindex_ping_bench(200, 2000)::numeric, 2) AS round_trip_us_lone;

\echo '== generating' :rows 'clustered 128-d vectors (seeded)'
DROP TABLE IF EXISTS items, centers, queries;
SELECT setseed(0.42);
CREATE TABLE centers AS
	SELECT c, array_agg((random() * 10)::real ORDER BY d) AS v
	FROM generate_series(1, 100) c, generate_series(1, 128) d GROUP BY c;
CREATE TABLE items (id bigserial PRIMARY KEY, embedding real[]);
INSERT INTO items (embedding)
	SELECT (SELECT array_agg((v[d] + (random() - 0.5) * 4)::real ORDER BY d)
			FROM generate_series(1, 128) d)
	FROM generate_series(1, :rows) i
	JOIN centers ON c = 1 + (i % 100);
CREATE TABLE queries AS
	SELECT q, (SELECT array_agg((v[d] + (random() - 0.5) * 4)::real ORDER BY d)
			   FROM generate_series(1, 128) d) AS v
	FROM generate_series(1, 50) q JOIN centers ON c = 1 + (q * 7 % 100);
VACUUM ANALYZE items;

\echo '== exact answers (sequential scan)'
SET enable_indexscan = off;
CREATE TEMP TABLE truth AS
	SELECT q, (SELECT array_agg(id ORDER BY dist, id) FROM (
		SELECT id, embedding <-> v AS dist FROM items ORDER BY dist, id LIMIT 10) t) AS ids
	FROM queries;
RESET enable_indexscan;

\echo '== CREATE INDEX ... USING gpuivf (lists = 316)'
\timing on
CREATE INDEX items_embedding_idx ON items USING gpuivf (embedding real_l2_ops) WITH (lists = 316);
\timing off

-- recall@10 and mean latency of single-query index scans at several probes
CREATE FUNCTION demo_eval(p int) RETURNS TABLE (probes int, recall_at_10 numeric, mean_ms numeric)
LANGUAGE plpgsql AS $$
DECLARE
	r record;
	got bigint[];
	hits int := 0;
	t0 timestamptz;
	total interval := '0';
BEGIN
	PERFORM set_config('gpuivf.probes', p::text, true);
	FOR r IN SELECT q.q, q.v, t.ids FROM queries q JOIN truth t USING (q) LOOP
		t0 := clock_timestamp();
		SELECT array_agg(id) INTO got FROM (
			SELECT id FROM items ORDER BY embedding <-> r.v LIMIT 10) s;
		total := total + (clock_timestamp() - t0);
		hits := hits + (SELECT count(*) FROM unnest(got) g WHERE g = ANY (r.ids));
	END LOOP;
	probes := p;
	recall_at_10 := round(hits / (10.0 * (SELECT count(*) FROM queries)), 3);
	mean_ms := round((extract(epoch FROM total) * 1000 / (SELECT count(*) FROM queries))::numeric, 3);
	RETURN NEXT;
END $$;

\echo '== k-NN through the index: ORDER BY embedding <-> q LIMIT 10 (50 queries)'
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <-> (SELECT v FROM queries WHERE q = 1) LIMIT 10;
SELECT * FROM demo_eval(1)
UNION ALL SELECT * FROM demo_eval(4)
UNION ALL SELECT * FROM demo_eval(16)
UNION ALL SELECT * FROM demo_eval(32);

\echo '== exact search for comparison (sequential scan, 50 queries)'
CREATE FUNCTION demo_exact_ms() RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
	n int;
BEGIN
	PERFORM set_config('enable_indexscan', 'off', true);
	SELECT count(*) INTO n FROM queries q,
		LATERAL (SELECT id FROM items ORDER BY embedding <-> q.v LIMIT 10) s;
	RETURN round((extract(epoch FROM clock_timestamp() - t0) * 1000 / 50)::numeric, 3);
END $$;
SELECT demo_exact_ms() AS exact_mean_ms;

\echo '== batch API: 50 queries in one call (probes = 16)'
SET gpuivf.probes = 16;
SELECT count(*) AS rows_returned, count(DISTINCT query) AS queries
FROM gpuivf_search('items_embedding_idx', (SELECT array_agg(v ORDER BY q) FROM queries), 10);

\echo '== the index store in the device service'
SELECT index_name, backend, state, dim, metric, lists, rows, slabs_used, bytes, searches, search_batches
FROM gpuindex_stats;
