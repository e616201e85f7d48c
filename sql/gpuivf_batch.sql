--
-- gpuivf_search(): many queries in one call, visible rows only, the same
-- answers as the ordered index scan; and its bad input.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;
SELECT setseed(0.125);

CREATE TABLE ivf_docs (id bigint PRIMARY KEY, title text, v real[])
WITH (fillfactor = 70, autovacuum_enabled = off);
INSERT INTO ivf_docs
SELECT i, 'doc ' || i, array(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
FROM generate_series(1, 2000) i;
CREATE INDEX ivf_docs_v ON ivf_docs USING gpuivf (v) WITH (lists = 10);
CREATE TABLE ivf_q AS
SELECT q, array(SELECT random()::real FROM generate_series(1, 8) WHERE q > 0) AS v
FROM generate_series(1, 1000) q;
-- all queries as one 1000 x 8 array
SELECT array_agg(v ORDER BY q) AS qs FROM ivf_q \gset

SET gpuivf.probes = 3;
-- 1000 queries, 10 rows each, one search request to the service (served in
-- one backend call, or a few slices when it takes longer than
-- gpuindex.search_slice_ms: never a call per query)
SELECT searches AS s0, search_batches AS b0 FROM gpuindex_stats
WHERE indexrelid = 'ivf_docs_v'::regclass \gset
-- (a column named ctid cannot go into a table as such: rename it)
CREATE TABLE ivf_res AS
SELECT query, ctid AS tid, distance FROM gpuivf_search('ivf_docs_v', :'qs'::real[], 10);
SELECT searches - :s0 AS searches, search_batches - :b0 <= 1000 / 16 AS batched FROM gpuindex_stats
WHERE indexrelid = 'ivf_docs_v'::regclass;
SELECT count(*), count(DISTINCT query), min(query), max(query) FROM ivf_res;

-- the same rows, in the same order, as the ordered index scan
SET enable_seqscan = off;
SELECT count(*) AS mismatches
FROM ivf_q q
WHERE array(SELECT d.id FROM ivf_docs d JOIN ivf_res r ON r.tid = d.ctid
            WHERE r.query = q.q ORDER BY r.distance, d.id)
      IS DISTINCT FROM
      array(SELECT id FROM ivf_docs ORDER BY v <-> q.v LIMIT 10);
RESET enable_seqscan;
-- distances are the operator's (to float precision), ascending per query
SELECT bool_and(abs(r.distance - (d.v <-> q.v)) <= 1e-6 * greatest(1, d.v <-> q.v)) AS distances_ok
FROM ivf_res r JOIN ivf_docs d ON d.ctid = r.tid JOIN ivf_q q ON q.q = r.query;
SELECT bool_and(ok) AS ascending
FROM (SELECT distance >= lag(distance) OVER w OR lag(distance) OVER w IS NULL AS ok
      FROM ivf_res WINDOW w AS (PARTITION BY query ORDER BY distance)) s;
DROP TABLE ivf_res;

-- the packed form: the same queries as little-endian float4, row after row.
-- f4le() packs a real[] so (float4send() is big-endian: reverse its bytes).
CREATE FUNCTION f4le(real[]) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT coalesce(string_agg(substr(b, 4, 1) || substr(b, 3, 1) || substr(b, 2, 1) || substr(b, 1, 1),
                             '' ORDER BY o), '')
  FROM unnest($1) WITH ORDINALITY u(x, o), float4send(u.x) b $$;
-- known encodings: 1 = 0x3f800000, -2 = 0xc0000000, 0.5 = 0x3f000000, 3 = 0x40400000
SELECT f4le('{1,-2}') AS one_minus_two, f4le('{{0.5},{3}}') AS half_three, f4le('{}') AS empty;
SELECT f4le(:'qs'::real[]) AS qb \gset
SELECT length(:'qb'::bytea) AS qb_bytes;
-- every row of the real[] form, in the same order, and nothing else
CREATE TABLE ivf_arr AS SELECT n, query, ctid AS tid, distance
FROM gpuivf_search('ivf_docs_v', :'qs'::real[], 10) WITH ORDINALITY r(query, ctid, distance, n);
CREATE TABLE ivf_bin AS SELECT n, query, ctid AS tid, distance
FROM gpuivf_search_packed('ivf_docs_v', :'qb'::bytea, 10) WITH ORDINALITY r(query, ctid, distance, n);
SELECT (SELECT count(*) FROM ivf_arr) AS arr_rows, (SELECT count(*) FROM ivf_bin) AS bin_rows,
       (SELECT count(*) FROM (TABLE ivf_arr EXCEPT ALL TABLE ivf_bin) a) +
       (SELECT count(*) FROM (TABLE ivf_bin EXCEPT ALL TABLE ivf_arr) b) AS differences;
-- the comparison sees a difference: the queries in reverse order differ row by
-- row, and match once numbered back
CREATE TABLE ivf_rev AS SELECT n, query, ctid AS tid, distance
FROM gpuivf_search_packed('ivf_docs_v', f4le((SELECT array_agg(v ORDER BY q DESC) FROM ivf_q)), 10)
     WITH ORDINALITY r(query, ctid, distance, n);
SELECT (SELECT count(*) FROM (TABLE ivf_arr EXCEPT ALL TABLE ivf_rev) a) > 0 AS reversed_differs,
       (SELECT count(*) FROM (SELECT query, tid, distance FROM ivf_arr
                              EXCEPT ALL
                              SELECT 1001 - query, tid, distance FROM ivf_rev) a) AS renumbered_differences;
DROP TABLE ivf_arr, ivf_bin, ivf_rev;
-- the key form likewise
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.key IS DISTINCT FROM b.key OR a.distance IS DISTINCT FROM b.distance
                        OR a.query IS DISTINCT FROM b.query) AS differences
FROM gpuivf_search('ivf_docs_v', :'qs'::real[], 10, 'id', NULL::bigint) WITH ORDINALITY a(query, key, distance, n)
FULL JOIN gpuivf_search_packed('ivf_docs_v', :'qb'::bytea, 10, 'id', NULL::bigint) WITH ORDINALITY b(query, key, distance, n)
  USING (n);
SELECT query, key, distance
FROM gpuivf_search_packed('ivf_docs_v', f4le((SELECT v FROM ivf_docs WHERE id = 42)), 1, 'id', NULL::bigint);

-- probes = lists: the exact answer
SET gpuivf.probes = 10;
SELECT count(*) AS mismatches
FROM ivf_q q
WHERE array(SELECT key FROM gpuivf_search('ivf_docs_v', ARRAY[q.v], 5, 'id', NULL::bigint))
      IS DISTINCT FROM
      array(SELECT id FROM ivf_docs ORDER BY v <-> q.v, id LIMIT 5)
  AND q.q <= 100;

-- a 1-D array is one query; the key variant returns the chosen column
SELECT s.query, s.key, abs(s.distance - (d.v <-> q.v)) < 1e-6 AS distance_ok
FROM (SELECT v FROM ivf_docs WHERE id = 42) q,
     gpuivf_search('ivf_docs_v', q.v, 3, 'id', NULL::bigint) s
JOIN ivf_docs d ON d.id = s.key
ORDER BY s.distance;
SELECT array(SELECT id FROM ivf_docs ORDER BY v <-> (SELECT v FROM ivf_docs WHERE id = 42), id LIMIT 3);
SELECT query, key
FROM gpuivf_search('ivf_docs_v', (SELECT v FROM ivf_docs WHERE id = 42), 1, 'title', NULL::text);
SELECT d.id FROM gpuivf_search('ivf_docs_v', (SELECT v FROM ivf_docs WHERE id = 42), 1) s
JOIN ivf_docs d ON d.ctid = s.ctid;

-- only visible rows, and still k of them: deleted rows are skipped and the
-- search goes on with a larger k
BEGIN;
DELETE FROM ivf_docs WHERE id % 4 <> 0;
SELECT count(*) AS rows, bool_and(d.id % 4 = 0) AS all_visible,
       min(cnt) AS min_per_query
FROM (SELECT query, count(*) OVER (PARTITION BY query) AS cnt, ctid
      FROM gpuivf_search('ivf_docs_v', :'qs'::real[], 10)) r
JOIN ivf_docs d ON d.ctid = r.ctid;
SELECT count(*) AS mismatches
FROM ivf_q q
WHERE array(SELECT key FROM gpuivf_search('ivf_docs_v', ARRAY[q.v], 10, 'id', NULL::bigint))
      IS DISTINCT FROM
      array(SELECT id FROM ivf_docs ORDER BY v <-> q.v, id LIMIT 10)
  AND q.q <= 50;
-- the same in one call, each query twice (rows fetched together and shared
-- between the queries that found them; a text key column)
SELECT count(*) AS queries,
       count(*) FILTER (WHERE b.got IS DISTINCT FROM
                        array(SELECT title FROM ivf_docs ORDER BY v <-> q.v, id LIMIT 10)) AS mismatches
FROM (SELECT query, array_agg(key ORDER BY n) AS got
      FROM gpuivf_search('ivf_docs_v',
                         (SELECT array_agg(v ORDER BY r, q) FROM ivf_q, generate_series(1, 2) r
                          WHERE q <= 50), 10, 'title', NULL::text)
           WITH ORDINALITY AS s(query, key, distance, n)
      GROUP BY query) b
JOIN ivf_q q ON q.q = (b.query - 1) % 50 + 1;
ROLLBACK;
-- rows this transaction inserted are found (the insert queue is flushed)
BEGIN;
INSERT INTO ivf_docs VALUES (5001, 'new', '{0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5}');
SELECT key FROM gpuivf_search('ivf_docs_v', '{0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5}'::real[], 1, 'id', NULL::bigint);
ROLLBACK;
-- k larger than the table: every row once
SELECT count(*), count(DISTINCT ctid)
FROM gpuivf_search('ivf_docs_v', '{0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5}'::real[], 5000);
-- a HOT update (no new index entry): the visible version's ctid comes back
BEGIN;
SELECT ctid AS old_ctid FROM ivf_docs WHERE id = 42 \gset
UPDATE ivf_docs SET title = 'updated' WHERE id = 42;
SELECT pg_stat_get_xact_tuples_hot_updated('ivf_docs'::regclass) AS hot_updates;
SELECT s.ctid <> :'old_ctid' AS moved, d.id, d.title
FROM gpuivf_search('ivf_docs_v', (SELECT v FROM ivf_docs WHERE id = 42), 1) s
JOIN ivf_docs d ON d.ctid = s.ctid;
COMMIT;
-- key values stored out of line (TOAST) and rows moved by HOT updates, in one
-- call of 50 queries: each query's keys equal a sequential scan's
BEGIN;
UPDATE ivf_docs SET title = (SELECT string_agg(md5(id::text || g::text), '') FROM generate_series(1, 200) g)
WHERE id % 3 = 0;
SELECT count(*) FILTER (WHERE pg_column_size(title) > 2000) > 0 AS toasted FROM ivf_docs;
SELECT count(*) AS queries,
       count(*) FILTER (WHERE b.got IS DISTINCT FROM
                        array(SELECT md5(title) FROM ivf_docs ORDER BY v <-> q.v, id LIMIT 10)) AS mismatches
FROM (SELECT query, array_agg(md5(key) ORDER BY n) AS got
      FROM gpuivf_search('ivf_docs_v', (SELECT array_agg(v ORDER BY q) FROM ivf_q WHERE q <= 50),
                         10, 'title', NULL::text)
           WITH ORDINALITY AS s(query, key, distance, n)
      GROUP BY query) b
JOIN ivf_q q ON q.q = b.query;
ROLLBACK;
-- a temporary table (its pages in the session's local buffers): one call of
-- 100 queries against sequential scans
CREATE TEMP TABLE ivf_tmp AS SELECT id, v FROM ivf_docs;
CREATE INDEX ivf_tmp_v ON ivf_tmp USING gpuivf (v real_l2_ops) WITH (lists = 10);
SELECT count(*) AS queries,
       count(*) FILTER (WHERE b.got IS DISTINCT FROM
                        array(SELECT id FROM ivf_tmp ORDER BY v <-> q.v, id LIMIT 10)) AS mismatches
FROM (SELECT query, array_agg(key ORDER BY n) AS got
      FROM gpuivf_search('ivf_tmp_v', (SELECT array_agg(v ORDER BY q) FROM ivf_q WHERE q <= 100),
                         10, 'id', NULL::bigint)
           WITH ORDINALITY AS s(query, key, distance, n)
      GROUP BY query) b
JOIN ivf_q q ON q.q = b.query;
DROP TABLE ivf_tmp;
RESET gpuivf.probes;

--
-- Bad input
--
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8}}'::real[], 0);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8}}'::real[], -1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8}}'::real[], 100001);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,NaN}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,Infinity}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,NULL}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{{{1,2,3,4,5,6,7,8}}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_pkey', '{{1,2,3,4,5,6,7,8}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs', '{{1,2,3,4,5,6,7,8}}'::real[], 1);
SELECT * FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1, 'nosuch', NULL::int);
SELECT * FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1, 'id', NULL::int);
SELECT * FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1, 'ctid', NULL::tid);
-- the packed form
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8}'), 0);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8}'), 100001);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', ''::bytea, 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3}'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8,9,10}'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8}') || '\x00'::bytea, 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,NaN}}'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{{1,2,3,4,5,6,7,8},{1,2,-Infinity,4,5,6,7,8}}'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', decode(repeat('00', 32 * 1000001), 'hex'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_pkey', f4le('{1,2,3,4,5,6,7,8}'), 1);
SELECT * FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8}'), 1, 'id', NULL::int);
-- an untyped literal resolves to the real[] form (the packed form has its own name);
-- distance rounded: the CUDA backend accumulates in float, the host in double
SELECT query, ctid, round(distance::numeric, 3) AS distance
FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}', 1);
SELECT count(*) FROM gpuivf_search('ivf_docs_v', NULL::real[], 1);
SELECT count(*) FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], NULL);
SELECT count(*) FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1, NULL, NULL::int);
SELECT count(*) FROM gpuivf_search_packed('ivf_docs_v', NULL::bytea, 1);
SELECT count(*) FROM gpuivf_search_packed('ivf_docs_v', f4le('{1,2,3,4,5,6,7,8}'), NULL);
SELECT count(*) FROM gpuivf_search_packed('ivf_docs_v', NULL::bytea, 1, 'id', NULL::bigint);
-- an empty index: no rows (and no dimension to check)
CREATE TABLE ivf_none (v real[]);
CREATE INDEX ivf_none_v ON ivf_none USING gpuivf (v);
SELECT count(*) FROM gpuivf_search('ivf_none_v', '{1,2}'::real[], 1);
SELECT count(*) FROM gpuivf_search_packed('ivf_none_v', f4le('{1,2}'), 1);
SELECT count(*) FROM gpuivf_search_packed('ivf_none_v', ''::bytea, 1);
DROP TABLE ivf_none;
-- reading an index needs SELECT on its table
CREATE ROLE regress_gpuivf_reader;
SET ROLE regress_gpuivf_reader;
SELECT * FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1);
SELECT * FROM gpuivf_centroids('ivf_docs_v');
SELECT * FROM gpuivf_list_items('ivf_docs_v');
RESET ROLE;
GRANT SELECT ON ivf_docs TO regress_gpuivf_reader;
SET ROLE regress_gpuivf_reader;
SELECT count(*) FROM gpuivf_search('ivf_docs_v', '{1,2,3,4,5,6,7,8}'::real[], 1);
RESET ROLE;
REVOKE SELECT ON ivf_docs FROM regress_gpuivf_reader;
DROP ROLE regress_gpuivf_reader;

-- the stages of the last search statement: all known, in order, adding up
SELECT count(*) FROM gpuivf_search('ivf_docs_v', :'qs'::real[], 10);
SELECT count(*) FILTER (WHERE us < 0) AS unknown,
       bool_and(us >= 0) AS all_measured,
       max(us) FILTER (WHERE stage = 'requests') >= 1 AS requested,
       max(us) FILTER (WHERE stage = 'total') >=
         sum(us) FILTER (WHERE stage IN ('input', 'submit', 'queue', 'round', 'search',
                                         'answer', 'wake', 'copy out', 'visibility',
                                         'result rows')) AS total_covers_stages,
       max(us) FILTER (WHERE stage = 'search') > 0 AS searched
FROM gpuindex_search_stages();
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM ivf_docs ORDER BY v <-> '{1,2,3,4,5,6,7,8}' LIMIT 3) s;
RESET enable_seqscan;
SELECT string_agg(stage, ',') FILTER (WHERE stage NOT LIKE 'search: %') AS stages,
       bool_and(us >= 0) AS all_measured
FROM gpuindex_search_stages();

DROP TABLE ivf_docs, ivf_q;
DROP FUNCTION f4le(real[]);
SELECT count(*) FROM gpuindex_stats WHERE index_name LIKE 'ivf\_%';
-- leave the database as the next test expects it
DROP EXTENSION gpuindex;
