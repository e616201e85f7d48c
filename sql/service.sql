-- The device service as seen from SQL (the suite runs with gpuindex preloaded).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;

-- a round trip, and the service's identity
SELECT gpuindex_ping();
SELECT pid > 0 AS has_pid, generation >= 1 AS has_generation,
       backend IN ('cpu', 'cuda') AS known_backend, device <> '' AS has_device,
       requests >= 1 AS counted, rounds >= 1 AS rounds_counted,
       mean_batch >= 1 AS sane_mean_batch, devices >= 1 AS has_devices,
       waiting = 0 AS none_waiting
FROM gpuindex_service();

-- the service is the background worker the postmaster started, with no database
SELECT count(*) AS services, bool_and(datid IS NULL) AS no_database
FROM pg_stat_activity WHERE backend_type = 'gpuindex device service';
SELECT s.pid = a.pid AS same_process
FROM gpuindex_service() s, pg_stat_activity a
WHERE a.backend_type = 'gpuindex device service';

-- requests are counted: 100 more round trips show up
CREATE TEMP TABLE before AS SELECT requests FROM gpuindex_service();
SELECT gpuindex_ping() FROM generate_series(1, 100) \g /dev/null
SELECT s.requests - b.requests >= 101 AS counted
FROM gpuindex_service() s, before b;

-- the service's time is counted: in rounds, and in the compute backend's searches
CREATE TEMP TABLE before_t AS SELECT round_seconds, search_seconds FROM gpuindex_service();
CREATE TABLE svc_t AS SELECT i AS id, ARRAY[i, i + 1]::real[] AS v FROM generate_series(1, 100) i;
CREATE INDEX svc_t_v ON svc_t USING gpuivf (v real_l2_ops) WITH (lists = 2);
SET enable_seqscan = off;
SELECT id FROM svc_t ORDER BY v <-> '{3,4}' LIMIT 1;
RESET enable_seqscan;
SELECT s.round_seconds > b.round_seconds AS rounds_timed,
       s.search_seconds > b.search_seconds AS searches_timed
FROM gpuindex_service() s, before_t b;
DROP TABLE svc_t;

-- the in-backend timer: positive, and arguments are checked
SELECT gpuindex_ping_bench(100) > 0 AS positive;
SELECT gpuindex_ping_bench(0);
SELECT gpuindex_ping_bench(10, -1);
SELECT gpuindex_ping_bench(NULL) IS NULL AS strict;

-- the stats view has the documented columns (rows depend on other tests)
SELECT array_agg(attname::text ORDER BY attnum) AS columns
FROM pg_attribute WHERE attrelid = 'gpuindex_stats'::regclass AND attnum > 0;

-- GUCs: documented names, reserved prefix
SELECT name, CASE WHEN name = 'gpuindex.device' THEN setting IN ('auto', 'cpu', 'cuda')::text
	WHEN name = 'gpuindex.service_overlap' THEN setting IN ('auto', 'off', 'on')::text
	ELSE setting END AS setting, context FROM pg_settings
WHERE name IN ('gpuindex.memory_limit', 'gpuindex.batch_linger_us', 'gpuindex.device',
	'gpuindex.service_spin_us', 'gpuindex.client_spin_us', 'gpuindex.service_overlap')
ORDER BY name;
SET gpuindex.no_such_setting = 1;
SET gpuindex.batch_linger_us = 10;
