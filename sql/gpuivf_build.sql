--
-- gpuivf: the access method, its operator classes, CREATE INDEX options,
-- dimension rules and bad input at build and insert time.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;

-- the access method and its three operator classes, all valid
SELECT amname, amtype FROM pg_am WHERE amname = 'gpuivf';
SELECT c.opcname, c.opcintype::regtype, c.opcdefault, amvalidate(c.oid) AS valid
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'gpuivf'
ORDER BY c.opcname;

-- each class has one ORDER BY operator ('o') and two support functions
SELECT c.opcname, o.amopopr::regoperator AS operator, o.amoppurpose
FROM pg_opclass c
JOIN pg_am a ON a.oid = c.opcmethod
JOIN pg_amop o ON o.amopfamily = c.opcfamily
WHERE a.amname = 'gpuivf'
ORDER BY c.opcname;
SELECT c.opcname, p.amprocnum, p.amproc::regprocedure
FROM pg_opclass c
JOIN pg_am a ON a.oid = c.opcmethod
JOIN pg_amproc p ON p.amprocfamily = c.opcfamily
WHERE a.amname = 'gpuivf'
ORDER BY c.opcname, p.amprocnum;

-- the build phases shown in pg_stat_progress_create_index
SELECT i AS phase, pg_indexam_progress_phasename(a.oid, i) AS name
FROM pg_am a, generate_series(1, 7) i
WHERE a.amname = 'gpuivf'
ORDER BY i;

--
-- The lists option: 1 .. 32768, default 100
--
CREATE TABLE ivf_opt (id int, v real[]);
INSERT INTO ivf_opt VALUES (1, '{1,2,3}'), (2, '{3,2,1}'), (3, '{0,0,1}');
CREATE INDEX ON ivf_opt USING gpuivf (v) WITH (lists = 0);
CREATE INDEX ON ivf_opt USING gpuivf (v) WITH (lists = -5);
CREATE INDEX ON ivf_opt USING gpuivf (v) WITH (lists = 32769);
CREATE INDEX ON ivf_opt USING gpuivf (v) WITH (lists = 'many');
CREATE INDEX ON ivf_opt USING gpuivf (v) WITH (probes = 3);
-- more lists than rows: as many lists as rows, with a NOTICE
CREATE INDEX ivf_opt_v ON ivf_opt USING gpuivf (v) WITH (lists = 32768);
SELECT * FROM gpuivf_index_info('ivf_opt_v');
SELECT reloptions FROM pg_class WHERE relname = 'ivf_opt_v';
DROP INDEX ivf_opt_v;
-- default: 100 lists requested; 3 rows give 3 lists
CREATE INDEX ivf_opt_v ON ivf_opt USING gpuivf (v);
SELECT * FROM gpuivf_index_info('ivf_opt_v');
DROP INDEX ivf_opt_v;
CREATE INDEX ivf_opt_v ON ivf_opt USING gpuivf (v) WITH (lists = 2);
SELECT * FROM gpuivf_index_info('ivf_opt_v');
-- ALTER INDEX SET (lists) is accepted but only a REINDEX applies it
ALTER INDEX ivf_opt_v SET (lists = 3);
SELECT * FROM gpuivf_index_info('ivf_opt_v');
REINDEX INDEX ivf_opt_v;
SELECT * FROM gpuivf_index_info('ivf_opt_v');
ALTER INDEX ivf_opt_v SET (lists = 0);

--
-- Column types and index shapes the access method refuses
--
CREATE TABLE ivf_types (id int, d float8[], t text, v real[]);
CREATE INDEX ON ivf_types USING gpuivf (d);
CREATE INDEX ON ivf_types USING gpuivf (t);
CREATE INDEX ON ivf_types USING gpuivf (id);
CREATE INDEX ON ivf_types USING gpuivf (d real_l2_ops);
CREATE INDEX ON ivf_types USING gpuivf (v, id);
CREATE INDEX ON ivf_types USING gpuivf (v) INCLUDE (id);
CREATE UNIQUE INDEX ON ivf_types USING gpuivf (v);
CREATE INDEX ON ivf_types USING gpuivf (v int4_ops);
-- without ORDER BY the index is never used, even when asked to be
CREATE INDEX ivf_types_v ON ivf_types USING gpuivf (v);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_types WHERE v = '{1,2}';
EXPLAIN (COSTS OFF) SELECT id FROM ivf_types ORDER BY v <-> '{1,2}' LIMIT 1;
-- only its own operator: <#> is not in real_l2_ops
EXPLAIN (COSTS OFF) SELECT id FROM ivf_types ORDER BY v <#> '{1,2}' LIMIT 1;
RESET enable_seqscan;
DROP TABLE ivf_types;

--
-- Bad data at build time: every row is checked
--
CREATE TABLE ivf_bad (id int, v real[]);
INSERT INTO ivf_bad VALUES (1, '{1,2,3}'), (2, '{1,2}');
CREATE INDEX ON ivf_bad USING gpuivf (v);
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{1,NaN,3}');
CREATE INDEX ON ivf_bad USING gpuivf (v);
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{1,Infinity,3}');
CREATE INDEX ON ivf_bad USING gpuivf (v);
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{1,NULL,3}');
CREATE INDEX ON ivf_bad USING gpuivf (v);
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{{1,2},{3,4}}');
CREATE INDEX ON ivf_bad USING gpuivf (v);
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{}');
CREATE INDEX ON ivf_bad USING gpuivf (v);

-- the same checks at insert time
TRUNCATE ivf_bad;
INSERT INTO ivf_bad VALUES (1, '{1,2,3}');
CREATE INDEX ivf_bad_v ON ivf_bad USING gpuivf (v) WITH (lists = 1);
INSERT INTO ivf_bad VALUES (2, '{1,2}');
INSERT INTO ivf_bad VALUES (2, '{1,2,3,4}');
INSERT INTO ivf_bad VALUES (2, '{1,NaN,3}');
INSERT INTO ivf_bad VALUES (2, '{1,-Infinity,3}');
INSERT INTO ivf_bad VALUES (2, '{1,NULL,3}');
INSERT INTO ivf_bad VALUES (2, '{{1,2,3}}');
INSERT INTO ivf_bad VALUES (2, '{}');
-- nothing of the above reached the table or the index
SELECT count(*) FROM ivf_bad;
SELECT count(*) FROM gpuivf_list_items('ivf_bad_v');
SELECT rows FROM gpuindex_stats WHERE indexrelid = 'ivf_bad_v'::regclass;
DROP INDEX ivf_bad_v;

--
-- Dimensions: one vector per index tuple must fit a page, which allows
-- 2036 dimensions with 8 kB pages
--
TRUNCATE ivf_bad;
INSERT INTO ivf_bad SELECT i, array_fill(i::real, ARRAY[2036]) FROM generate_series(1, 3) i;
CREATE INDEX ivf_bad_v ON ivf_bad USING gpuivf (v) WITH (lists = 2);
SELECT * FROM gpuivf_index_info('ivf_bad_v');
SET enable_seqscan = off;
SET gpuivf.probes = 2;
SELECT id FROM ivf_bad ORDER BY v <-> array_fill(2.9::real, ARRAY[2036]) LIMIT 3;
RESET enable_seqscan;
RESET gpuivf.probes;
INSERT INTO ivf_bad VALUES (4, array_fill(4::real, ARRAY[2037]));
DROP INDEX ivf_bad_v;
INSERT INTO ivf_bad VALUES (4, array_fill(4::real, ARRAY[2037]));
DELETE FROM ivf_bad WHERE id < 4;
CREATE INDEX ON ivf_bad USING gpuivf (v);
DROP TABLE ivf_bad;

--
-- An empty table builds (no lists, no store) and then accepts inserts:
-- the first row fixes the dimension and creates one list
--
CREATE TABLE ivf_empty (id int, v real[]);
CREATE INDEX ivf_empty_v ON ivf_empty USING gpuivf (v) WITH (lists = 4);
SELECT * FROM gpuivf_index_info('ivf_empty_v');
SELECT count(*) FROM gpuindex_stats WHERE indexrelid = 'ivf_empty_v'::regclass;
SET enable_seqscan = off;
-- no rows, whatever the query's dimension
SELECT id FROM ivf_empty ORDER BY v <-> '{1,2}' LIMIT 1;
SELECT id FROM ivf_empty ORDER BY v <-> '{1,2,3}' LIMIT 1;
-- a NULL vector is not indexed and fixes nothing
INSERT INTO ivf_empty VALUES (1, NULL);
SELECT * FROM gpuivf_index_info('ivf_empty_v');
INSERT INTO ivf_empty VALUES (2, '{1,2}'), (3, '{2,2}'), (4, '{5,5}');
SELECT * FROM gpuivf_index_info('ivf_empty_v');
SELECT list, centroid FROM gpuivf_centroids('ivf_empty_v');
INSERT INTO ivf_empty VALUES (5, '{1,2,3}');
-- distances: {2,2} 0, {1,2} 1, {5,5} sqrt(18) = 4.242640687119285
SELECT id, v <-> '{2,2}' AS dist FROM ivf_empty ORDER BY v <-> '{2,2}' LIMIT 10;
SELECT rows, state FROM gpuindex_stats WHERE indexrelid = 'ivf_empty_v'::regclass;
-- the NULL row comes last in a sequential scan and not at all from the index
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT id FROM ivf_empty ORDER BY v <-> '{2,2}';
RESET enable_indexscan;
DROP TABLE ivf_empty;

-- an unlogged table (the index gets an init fork)
CREATE UNLOGGED TABLE ivf_unlogged (id int, v real[]);
CREATE INDEX ivf_unlogged_v ON ivf_unlogged USING gpuivf (v) WITH (lists = 2);
INSERT INTO ivf_unlogged SELECT i, ARRAY[i, i]::real[] FROM generate_series(1, 20) i;
SET enable_seqscan = off;
SELECT id FROM ivf_unlogged ORDER BY v <-> '{7.2,7.2}' LIMIT 3;
RESET enable_seqscan;
DROP TABLE ivf_unlogged;

-- cosine does not index zero vectors (their cosine distance is NaN)
CREATE TABLE ivf_zero (id int, v real[]);
INSERT INTO ivf_zero VALUES (1, '{0,0}'), (2, '{1,0}'), (3, '{0,1}'), (4, '{0,0}');
CREATE INDEX ivf_zero_v ON ivf_zero USING gpuivf (v real_cosine_ops) WITH (lists = 1);
INSERT INTO ivf_zero VALUES (5, '{0,0}'), (6, '{1,1}');
SELECT count(*) FROM gpuivf_list_items('ivf_zero_v');
SET enable_seqscan = off;
SELECT id, v <=> '{1,0.1}' AS dist FROM ivf_zero ORDER BY v <=> '{1,0.1}' LIMIT 10;
RESET enable_seqscan;
DROP TABLE ivf_zero;

DROP TABLE ivf_opt;
-- no store outlives its index
SELECT count(*) FROM gpuindex_stats WHERE index_name LIKE 'ivf\_%';
-- leave the database as the next test expects it
DROP EXTENSION gpuindex;
