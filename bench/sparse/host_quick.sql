-- A first, one-client gpusparse measurement from SQL (not the full benchmark
-- of bench/sparse/run.py: no peers but the sequential scan).  Write docs.txt /
-- queries.txt with `python3 bench/sparse/gen_synthetic.py 100k --tsv .` and load
-- them into d and q first:
--   CREATE TABLE d (id int, v spvec(30522)); CREATE TABLE q (id int, v spvec(30522));
--   \copy d from docs.txt    \copy q from queries.txt
SET jit = off;		-- its compile time would dwarf a 1 ms query
\timing on
CREATE INDEX IF NOT EXISTS d_v ON d USING gpusparse (v);
\timing off
CREATE OR REPLACE FUNCTION sp_run(n int, use_index bool) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; qv spvec; r int[];
BEGIN
  IF use_index THEN SET LOCAL enable_seqscan = off; ELSE SET LOCAL enable_indexscan = off; END IF;
  t0 := clock_timestamp();
  FOR i IN 0 .. n - 1 LOOP
    SELECT v INTO qv FROM q WHERE id = i;
    -- EXECUTE plans each query with the settings above (a cached plan would not)
    EXECUTE 'SELECT array_agg(id) FROM (SELECT id FROM d ORDER BY v <#> $1 LIMIT 10) s' INTO r USING qv;
  END LOOP;
  RETURN n / extract(epoch FROM clock_timestamp() - t0);
END $$;
SELECT round(sp_run(200, true)::numeric, 1) AS index_qps;
SELECT round(sp_run(10, false)::numeric, 2) AS seqscan_qps;
