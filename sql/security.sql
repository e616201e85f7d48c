--
-- What a role may see through gpuindex's functions: no more than a plain
-- SELECT would show it.  Row-level security on the table makes the batch
-- search and the inspection functions refuse (they cannot apply policies),
-- while the ordered index scan applies them; the per-index store statistics
-- of every database are not for PUBLIC.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
DROP ROLE IF EXISTS regress_gpuindex_reader;
CREATE ROLE regress_gpuindex_reader;
RESET client_min_messages;
SELECT setseed(0.5);

CREATE TABLE sec_docs (id int PRIMARY KEY, owner text, v real[]);
INSERT INTO sec_docs
SELECT i, CASE WHEN i <= 10 THEN 'regress_gpuindex_reader' ELSE 'someone else' END,
       array(SELECT random()::real FROM generate_series(1, 4) WHERE i > 0)
FROM generate_series(1, 500) i;
CREATE INDEX sec_docs_v ON sec_docs USING gpuivf (v) WITH (lists = 5);
GRANT SELECT ON sec_docs TO regress_gpuindex_reader;

-- without a policy the reader may use everything
SET ROLE regress_gpuindex_reader;
SELECT count(*) FROM gpuivf_search('sec_docs_v', ARRAY[[0.5, 0.5, 0.5, 0.5]]::real[], 20);
SELECT count(*) FROM gpuivf_list_items('sec_docs_v');
SELECT count(*) FROM gpuivf_centroids('sec_docs_v');
RESET ROLE;

-- a policy that shows the reader its 10 rows
ALTER TABLE sec_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY sec_own ON sec_docs FOR SELECT USING (owner = current_user);
SET ROLE regress_gpuindex_reader;
SET gpuivf.probes = 5;
SET enable_seqscan = off;
-- the ordered scan applies the policy: only the reader's rows
SELECT count(*), max(id) FROM
  (SELECT id FROM sec_docs ORDER BY v <-> '{0.5,0.5,0.5,0.5}' LIMIT 50) s;
RESET enable_seqscan;
-- the batch search and the inspection functions refuse
SELECT count(*) FROM gpuivf_search('sec_docs_v', ARRAY[[0.5, 0.5, 0.5, 0.5]]::real[], 20);
SELECT count(*) FROM gpuivf_search('sec_docs_v', ARRAY[[0.5, 0.5, 0.5, 0.5]]::real[], 20,
                                   'id', NULL::int);
SELECT count(*) FROM gpuivf_list_items('sec_docs_v');
SELECT count(*) FROM gpuivf_centroids('sec_docs_v');
-- other databases' indexes and activity: not for PUBLIC
SELECT count(*) FROM gpuindex_store_stats();
SELECT count(*) FROM gpuindex_stats;
RESET ROLE;

-- the owner is not subject to its own policies (unless forced): allowed
SELECT count(*) FROM gpuivf_search('sec_docs_v', ARRAY[[0.5, 0.5, 0.5, 0.5]]::real[], 20);
-- a superuser sees the statistics
SELECT count(*) > 0 AS has_stores FROM gpuindex_stats;

DROP TABLE sec_docs;
DROP ROLE regress_gpuindex_reader;
