--
-- The sparse vector type spvec: text and binary forms, type modifier,
-- casts, operators.  Expected values are computed by hand (quoted in
-- comments); a seeded random set and vectors of 100,000+ non-zeros are
-- checked against references computed in plain SQL from the dense real[]
-- forms and against the real[] operators.
--
-- quietly: whether an earlier test left the extension in place or not
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuindex;
RESET client_min_messages;

-- 'ok: <result>' or '<SQLSTATE>: <message>', to show error codes
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE q INTO r;
	RETURN 'ok: ' || coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

--
-- Catalog: the type, its operators and casts; every function immutable,
-- strict and parallel safe
--
SELECT typname, typlen, typalign, typstorage,
       obj_description(oid, 'pg_type') IS NOT NULL AS commented
FROM pg_type WHERE typname = 'spvec';

SELECT oprname, oprcode, oprcom::regoperator, oprresult::regtype
FROM pg_operator
WHERE oprleft = 'spvec'::regtype AND oprright = 'spvec'::regtype
  AND oprname IN ('<->', '<#>', '<=>')
ORDER BY oprname;

SELECT castsource::regtype, casttarget::regtype, castfunc::regprocedure,
       castcontext
FROM pg_cast
WHERE castsource = 'spvec'::regtype OR casttarget = 'spvec'::regtype
ORDER BY 1::text, 2::text;

SELECT p.oid::regprocedure AS function, provolatile, proisstrict, proparallel
FROM pg_proc p
WHERE ('spvec'::regtype = ANY (proargtypes) OR prorettype = 'spvec'::regtype)
  AND (proname LIKE 'spvec%' OR proname IN ('l2_norm', 'nnz', 'dims'))
ORDER BY 1::text;

--
-- Text form: sorted on output, zeros dropped, whitespace tolerated
--
SELECT '{3:1.5,1:0.1,2:0}/5'::spvec AS unsorted_with_zero,
       '  { 5 : -2 ,	1:1e3 }  /  5  '::spvec AS spaces,
       '{}/3'::spvec AS empty,
       '{ }/3'::spvec AS empty_space,
       '{1:0,2:-0}/2'::spvec AS only_zeros,
       '{1:+2,2:.5,3:-0.25e1}/3'::spvec AS number_forms;

-- values print in float4's shortest exact form: 0.1 stays 0.1, 1/3 rounds
-- to 0.33333334, the extremes of float4 and a denormal survive
SELECT '{1:0.1,2:0.333333333333,3:3.4028235e38,4:-1.1754944e-38,5:1e-45}/5'::spvec
  AS shortest;

-- the same whatever extra_float_digits says (float4out would change)
SET extra_float_digits = 0;
SELECT '{1:0.1,2:0.333333333333}/2'::spvec AS efd0;
RESET extra_float_digits;

-- one dimension, one non-zero, the largest dimension and index
SELECT '{1:7}/1'::spvec AS one,
       '{1000000000:1.5}/1000000000'::spvec AS max_dim,
       '{}/1000000000'::spvec AS max_dim_empty;

-- text round trips
SELECT v, v::text::spvec::text = v::text AS round_trip
FROM (VALUES ('{1:1,2:2,3:3}/3'::spvec), ('{2:-0.1}/9'),
             ('{7:1e-40,9:-3e38}/10'), ('{}/1')) AS t(v);

--
-- Bad text input: every case an ERROR with its SQLSTATE (22P02 syntax,
-- 22003 out of range, 22000 data exception, 54000 limit exceeded)
--
SELECT q AS input, pg_temp.try(format('SELECT %L::spvec::text', q)) AS result
FROM (VALUES (''), ('   '), ('1:1}/3'), ('[1:1]/3'), ('{1:1}'), ('{1:1}3'),
             ('{1:1/3'), ('{1:1,}/3'), ('{,}/3'), ('{:1}/3'), ('{1:}/3'),
             ('{1 1}/3'), ('{1:1 2:2}/3'), ('{a:1}/3'), ('{1:a}/3'),
             ('{1:1}/'), ('{1:1}/x'), ('{1:1}/3x'), ('{1:1}/3/4'),
             ('{1:1}/3.5'), ('{1.5:1}/3'), ('{1:1}{2:2}/3')) AS t(q);

SELECT q AS input, pg_temp.try(format('SELECT %L::spvec::text', q)) AS result
FROM (VALUES ('{1:NaN}/3'), ('{1:nan}/3'), ('{2:Infinity}/3'),
             ('{2:-inf}/3'), ('{1:1e39}/3'), ('{1:-1e39}/3'),
             ('{1:1e-50}/3'), ('{1:1,1:2}/3'), ('{2:0,2:1}/3'),
             ('{3:1,1:1,3:1}/3'), ('{0:1}/3'), ('{-1:1}/3'), ('{4:1}/3'),
             ('{4:0}/3'), ('{2147483648:1}/3'), ('{99999999999999999999:1}/3'),
             ('{}/0'), ('{}/-1'), ('{}/1000000001'), ('{}/2147483648'),
             ('{}/99999999999999999999'), ('{1:1,2:1,3:1}/2'),
             ('{1:0,2:0,3:0}/2')) AS t(q);

-- the messages in full, with their details
SELECT '{1:1}'::spvec;
SELECT '{1:1,}/3'::spvec;
SELECT '{1:1,1:2}/3'::spvec;
SELECT '{4:1}/3'::spvec;
SELECT '{1:1,2:1,3:1}/2'::spvec;
SELECT '{}/1000000001'::spvec;

--
-- Type modifier: the dimension
--
CREATE TEMP TABLE tm (v spvec(5));
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'tm'::regclass AND attname = 'v';
INSERT INTO tm VALUES ('{1:1}/5'), ('{}/5');
INSERT INTO tm VALUES ('{1:1}/4');
INSERT INTO tm SELECT '{1:1}/6'::spvec;
INSERT INTO tm SELECT '{1,0,0,0,2}'::real[];
INSERT INTO tm SELECT '{1,0,0,2}'::real[];
INSERT INTO tm SELECT spvec('{5}', '{1}', 5);
INSERT INTO tm SELECT spvec('{5}', '{1}', 6);
SELECT v FROM tm ORDER BY v::text;
SELECT '{1:1}/3'::spvec(3) AS ok_3,
       '{1,2}'::real[]::spvec(2) AS ok_2,
       '{1:1}/1000000000'::spvec(1000000000) AS ok_max;
SELECT '{1:1}/3'::spvec(4);
SELECT '{1:1}/3'::spvec::spvec(2);
SELECT '{1,2,3}'::real[]::spvec(2);
SELECT q AS typmod, pg_temp.try(format('SELECT %L::%s::text', '{1:1}/1', q)) AS result
FROM (VALUES ('spvec(0)'), ('spvec(-1)'), ('spvec(1000000001)'),
             ('spvec(2,3)'), ('spvec(1)')) AS t(q);

--
-- Casts from and to real[] (the dense form), and spvec(indices, values, dim)
--
SELECT '{0,1.5,0,-2}'::real[]::spvec AS from_dense,
       '{0,0}'::real[]::spvec AS all_zeros,
       '[0:2]={1,0,3}'::real[]::spvec AS other_lower_bound,
       '{2:1.5,4:-2}/4'::spvec::real[] AS to_dense,
       '{}/3'::spvec::real[] AS empty_to_dense,
       '{0,1.5,0,-2}'::real[]::spvec::real[] = '{0,1.5,0,-2}'::real[]
         AS dense_round_trip;

-- assignment casts: to and from real[] columns, never implicitly
CREATE TEMP TABLE dense (d real[]);
INSERT INTO dense SELECT '{3:2.5}/4'::spvec;
SELECT d FROM dense;
SELECT '{1:1}/2'::spvec <-> '{1,2}'::real[];

SELECT q AS input, pg_temp.try(format('SELECT %s::text', q)) AS result
FROM (VALUES ($$'{}'::real[]::spvec$$), ($$'{1,NULL}'::real[]::spvec$$),
             ($$'{1,NaN}'::real[]::spvec$$), ($$'{Infinity}'::real[]::spvec$$),
             ($$'{-Infinity,0}'::real[]::spvec$$),
             ($$'{{1,2},{3,4}}'::real[]::spvec$$),
             ($$'{1:1}/1000000000'::spvec::real[]$$),
             ($$'{1:1}/134217728'::spvec::real[]$$)) AS t(q);

-- spvec(indices, values, dim): 1-based indices in any order, zeros dropped
SELECT spvec('{5,1,3}', '{0.5,1,0}', 5) AS unsorted,
       spvec('{}', '{}', 3) AS empty,
       spvec(ARRAY[2], ARRAY[-1::real], 2) AS one,
       spvec('{1000000000}', '{2}', 1000000000) AS max_index,
       spvec(NULL, '{1}', 3) IS NULL AS strict_null;
SELECT q AS input, pg_temp.try(format('SELECT %s::text', q)) AS result
FROM (VALUES ($$spvec('{1,2}', '{1}', 3)$$), ($$spvec('{}', '{1}', 3)$$),
             ($$spvec('{1,NULL}', '{1,2}', 3)$$),
             ($$spvec('{1,2}', '{1,NULL}', 3)$$),
             ($$spvec('{{1,2}}', '{{1,2}}', 3)$$),
             ($$spvec('{1,1}', '{1,2}', 3)$$), ($$spvec('{0}', '{1}', 3)$$),
             ($$spvec('{4}', '{1}', 3)$$), ($$spvec('{4}', '{0}', 3)$$),
             ($$spvec('{1}', '{NaN}', 3)$$),
             ($$spvec('{1}', '{-Infinity}', 3)$$),
             ($$spvec('{1,2,3}', '{1,1,1}', 2)$$),
             ($$spvec('{}', '{}', 0)$$), ($$spvec('{}', '{}', 1000000001)$$))
  AS t(q);
SELECT spvec('{1,2}', '{1}', 3);
SELECT spvec('{{1,2}}', '{{1,2}}', 3);

--
-- Operators and functions, hand-checked
--
-- a = {1:1,3:2,5:-1}/5, b = {2:4,3:0.5,5:2}/5:
-- ip = 2*0.5 + (-1)*2 = -1; |a|^2 = 6, |b|^2 = 20.25;
-- cosine = 1 - (-1)/sqrt(6*20.25) = 1.090721842325303;
-- differences 1,-4,1.5,0,-3: L2 = sqrt(28.25) = 5.315072906367325;
-- norms sqrt(6) = 2.449489742783178 and 4.5
SELECT spvec_inner_product(a, b) AS ip,
       a <#> b AS neg_ip,
       spvec_negative_inner_product(a, b) AS neg_ip_fn,
       a <=> b AS cos,
       spvec_cosine_distance(a, b) AS cos_fn,
       a <-> b AS l2,
       spvec_l2_distance(a, b) AS l2_fn,
       l2_norm(a) AS norm_a,
       l2_norm(b) AS norm_b,
       nnz(a) AS nnz_a, dims(a) AS dims_a
FROM (SELECT '{1:1,3:2,5:-1}/5'::spvec AS a, '{2:4,3:0.5,5:2}/5'::spvec AS b) AS t;

-- identical, parallel, opposite, orthogonal (<#> 0 and not -0), disjoint
SELECT '{1:1,2:2}/3'::spvec <-> '{1:1,2:2}/3' AS l2_same,
       '{1:1,2:2}/3'::spvec <#> '{1:1,2:2}/3' AS neg_ip_same,
       '{1:1,2:2}/3'::spvec <=> '{1:2,2:4}/3' AS cos_parallel,
       '{1:1,2:2}/3'::spvec <=> '{1:-2,2:-4}/3' AS cos_opposite,
       '{1:1}/3'::spvec <=> '{2:1}/3' AS cos_orthogonal,
       '{1:1}/3'::spvec <#> '{2:1}/3' AS neg_ip_disjoint,
       spvec_inner_product('{1:1}/3', '{2:1}/3') AS ip_disjoint,
       '{1:3}/3'::spvec <-> '{3:4}/3' AS l2_disjoint;

-- the operators commute
SELECT '{1:1,3:2}/3'::spvec <#> '{3:4}/3' = '{3:4}/3'::spvec <#> '{1:1,3:2}/3' AS ip_commutes,
       '{1:1,3:2}/3'::spvec <=> '{3:4}/3' = '{3:4}/3'::spvec <=> '{1:1,3:2}/3' AS cos_commutes,
       '{1:1,3:2}/3'::spvec <-> '{3:4}/3' = '{3:4}/3'::spvec <-> '{1:1,3:2}/3' AS l2_commutes;

-- the inner product is rounded to float4 once, after the sum in double:
-- 1 + 1e-8 = 1.00000001 in double, 1 in float4; the real[] operator keeps
-- the double
SELECT spvec_inner_product('{1:1,2:1}/2', '{1:1,2:1e-8}/2') AS ip_float4,
       '{1:1,2:1}/2'::spvec <#> '{1:1,2:1e-8}/2' AS neg_ip_float4,
       inner_product('{1,1}'::real[], '{1,1e-8}'::real[]) AS ip_real_array;

-- beyond the float4 range the inner product is +-Infinity (what the index
-- ranks by); the other functions stay in double
SELECT spvec_inner_product(v, v) AS ip_overflow,
       v <#> v AS neg_ip_overflow,
       spvec_inner_product(v, '{1:-3e38,2:-3e38}/2') AS ip_neg_overflow,
       v <=> v AS cos_large,
       v <-> '{1:-3e38,2:-3e38}/2' AS l2_large,
       l2_norm(v) AS norm_large
FROM (SELECT '{1:3e38,2:3e38}/2'::spvec AS v) AS t;

-- cosine distance with a zero vector is undefined: NaN, like pgvector
SELECT '{}/2'::spvec <=> '{1:1}/2' AS cos_zero_left,
       '{1:1}/2'::spvec <=> '{}/2' AS cos_zero_right,
       '{}/2'::spvec <=> '{}/2' AS cos_zero_both,
       '{}/2'::spvec <-> '{}/2' AS l2_zero,
       '{}/2'::spvec <#> '{1:1}/2' AS neg_ip_zero,
       l2_norm('{}/2') AS norm_zero;

-- different dimensions
SELECT '{1:1}/3'::spvec <#> '{1:1}/4';
SELECT '{1:1}/3'::spvec <=> '{1:1}/4';
SELECT '{1:1}/3'::spvec <-> '{1:1}/4';
SELECT spvec_inner_product('{}/4', '{}/3');

-- NULL arguments: STRICT, so NULL rather than an error
SELECT NULL::spvec <#> '{1:1}/3' IS NULL AS ip_null,
       '{1:1}/3'::spvec <=> NULL IS NULL AS cos_null,
       spvec_l2_distance(NULL, NULL) IS NULL AS l2_null,
       nnz(NULL) IS NULL AS nnz_null;

--
-- Seeded random vectors against references in plain SQL and the real[]
-- operators on the dense forms
--
SELECT setseed(0.42);

-- 60 vectors of dimension 400, each element non-zero with probability
-- id/600 (0 for the first few), values in [-1,1) scaled by 10^-3 .. 10^3;
-- the indices are given to spvec() in random order
CREATE TEMP TABLE rs AS
SELECT id,
       spvec(coalesce(array_agg(j ORDER BY o) FILTER (WHERE keep), '{}'),
             coalesce(array_agg(x ORDER BY o) FILTER (WHERE keep), '{}'),
             400) AS v
FROM (SELECT id, j, random() < id / 600.0 - 0.005 AS keep, random() AS o,
             ((random() * 2 - 1) * 10.0 ^ (id % 7 - 3))::real AS x
      FROM generate_series(1, 60) AS id, generate_series(1, 400) AS j) AS e
GROUP BY id;
ALTER TABLE rs ADD COLUMN d real[];
UPDATE rs SET d = v::real[];

SELECT count(*) AS vectors, min(nnz(v)) AS min_nnz, max(nnz(v)) AS max_nnz,
       sum(nnz(v)) AS total_nnz,
       bool_and(array_length(d, 1) = 400) AS dense_400,
       bool_and(nnz(v) = (SELECT count(*) FROM unnest(d) AS x WHERE x <> 0))
         AS nnz_matches_dense
FROM rs;

-- round trips: text, dense real[], (indices, values)
SELECT count(*) FILTER (WHERE v::text::spvec::text <> v::text) AS text_bad,
       count(*) FILTER (WHERE d::spvec::text <> v::text) AS dense_bad,
       count(*) FILTER (WHERE spvec(
           (SELECT coalesce(array_agg(i::int ORDER BY i DESC), '{}')
            FROM unnest(d) WITH ORDINALITY AS u(x, i) WHERE x <> 0),
           (SELECT coalesce(array_agg(x ORDER BY i DESC), '{}')
            FROM unnest(d) WITH ORDINALITY AS u(x, i) WHERE x <> 0),
           400)::text <> v::text) AS parts_bad
FROM rs;

-- all 3600 pairs; ip_ref: the products in double summed in index order
-- over the dense forms, rounded to real
CREATE TEMP TABLE rp AS
SELECT a.id AS ida, b.id AS idb, a.v AS va, b.v AS vb, a.d AS da, b.d AS db,
       (SELECT sum(x::float8 * y::float8 ORDER BY i)
        FROM unnest(a.d, b.d) WITH ORDINALITY AS u(x, y, i)) AS ip_double
FROM rs a, rs b;

SELECT count(*) AS pairs,
       count(*) FILTER (WHERE va <#> vb IS DISTINCT FROM
                        -(ip_double::real::float8)) AS neg_ip_bad,
       count(*) FILTER (WHERE spvec_inner_product(va, vb) IS DISTINCT FROM
                        ip_double::real::float8) AS ip_bad,
       count(*) FILTER (WHERE va <#> vb IS DISTINCT FROM
                        (da <#> db)::real::float8) AS neg_ip_vs_array_bad,
       count(*) FILTER (WHERE va <=> vb IS DISTINCT FROM da <=> db)
         AS cos_vs_array_bad,
       count(*) FILTER (WHERE va <-> vb IS DISTINCT FROM da <-> db)
         AS l2_vs_array_bad,
       count(*) FILTER (WHERE va <#> vb <> vb <#> va) AS not_commuting,
       -- the float4 rounding is visible: the double sums differ from it
       count(*) FILTER (WHERE ip_double <> ip_double::real::float8) > 1000
         AS rounding_matters,
       count(*) FILTER (WHERE (va <=> vb) = 'NaN') AS cos_nan
FROM rp;

-- l2_norm against sqrt(sum(x^2)) in double over the dense form
SELECT count(*) FILTER (WHERE l2_norm(v) <> (SELECT sqrt(sum(x::float8 * x::float8 ORDER BY i))
                                             FROM unnest(d) WITH ORDINALITY AS u(x, i)))
         AS norm_bad
FROM rs;

-- a nearest-neighbour ordering agrees with the reference ordering
SELECT (SELECT array_agg(idb ORDER BY va <#> vb, idb) FROM rp WHERE ida = 7)
     = (SELECT array_agg(idb ORDER BY -(ip_double::real), idb) FROM rp WHERE ida = 7)
  AS order_agrees;

--
-- 100,000 non-zeros and more
--
-- 100,000 non-zeros at indices 7, 14, ..., 700000 of 1,000,000, given to
-- spvec() in random order; the values (i % 97 - 48) / 8, or 100 where that
-- is 0, are exact in float4
CREATE TEMP TABLE big AS
SELECT spvec(array_agg(7 * i ORDER BY o), array_agg(x ORDER BY o), 1000000) AS v
FROM (SELECT i, random() AS o,
             CASE WHEN i % 97 = 48 THEN 100 ELSE (i % 97 - 48) / 8.0 END::real AS x
      FROM generate_series(1, 100000) AS i) AS e;

SELECT nnz(v), dims(v), length(v::text) AS text_length,
       v::text::spvec::text = v::text AS text_round_trip,
       v::real[]::spvec::text = v::text AS dense_round_trip,
       array_length(v::real[], 1) AS dense_length,
       (v::real[])[7] AS first, (v::real[])[8] AS after_first,
       (v::real[])[700000] AS last,
       left(v::text, 40) AS text_start, right(v::text, 30) AS text_end
FROM big;

-- the inner product with itself and the norm against the sum of squares
-- computed in SQL from the same values
SELECT spvec_inner_product(v, v) = ref::real::float8 AS ip_ok,
       v <#> v = -(ref::real::float8) AS neg_ip_ok,
       l2_norm(v) = sqrt(ref) AS norm_ok,
       v <=> v AS cos_self, v <-> v AS l2_self
FROM big,
     (SELECT sum(x::float8 * x::float8 ORDER BY i) AS ref
      FROM (SELECT i, CASE WHEN i % 97 = 48 THEN 100 ELSE (i % 97 - 48) / 8.0 END::real AS x
            FROM generate_series(1, 100000) AS i) AS e) AS r;

-- a dense real[] of 150,000 elements from generate_series, cast: the
-- non-zeros are the i with i % 13 <> 6
CREATE TEMP TABLE big2 AS
SELECT array_agg((i % 13 - 6)::real ORDER BY i)::spvec AS v,
       array_agg((i % 13 - 6)::real ORDER BY i) AS d
FROM generate_series(1, 150000) AS i;
SELECT nnz(v), dims(v),
       nnz(v) = (SELECT count(*) FROM generate_series(1, 150000) AS i
                 WHERE i % 13 <> 6) AS nnz_ok,
       v::real[] = d AS dense_round_trip,
       v::text::spvec::text = v::text AS text_round_trip,
       spvec_inner_product(v, v) = (SELECT sum(x::float8 * x::float8 ORDER BY i)
                                    FROM unnest(d) WITH ORDINALITY AS u(x, i))::real::float8
         AS ip_ok
FROM big2;

--
-- Binary form: spvec_send's bytes, and round trips through COPY (FORMAT
-- binary), which calls spvec_recv
--
-- dim 4, nnz 2, unused 0, 0-based indices 1 and 3, float4 1.5 and -2
SELECT spvec_send('{4:-2,2:1.5}/4');

\getenv abs_builddir PG_ABS_BUILDDIR
\set spvec_bin :abs_builddir '/results/spvec.bin'
\set spvec_recv :abs_builddir '/results/spvec_recv.bin'

CREATE TEMP TABLE bin_src (id int, v spvec);
INSERT INTO bin_src VALUES
  (1, '{}/1'), (2, '{1:7}/1'), (3, '{2:1.5,4:-2}/4'),
  (4, '{1:3.4028235e38,2:-1e-45,3:0.1,4:-0.33333334}/4'),
  (5, '{1000000000:1}/1000000000'), (6, NULL);
INSERT INTO bin_src SELECT 7, v FROM big;
INSERT INTO bin_src SELECT 8, v FROM big2;
INSERT INTO bin_src SELECT 100 + id, v FROM rs;
COPY bin_src TO :'spvec_bin' (FORMAT binary);
CREATE TEMP TABLE bin_dst (id int, v spvec);
COPY bin_dst FROM :'spvec_bin' (FORMAT binary);
SELECT count(*) AS rows,
       count(*) FILTER (WHERE s.v::text IS NOT DISTINCT FROM d.v::text) AS equal
FROM bin_src s JOIN bin_dst d USING (id);
SELECT id, v FROM bin_dst WHERE id < 7 ORDER BY id;

-- spvec_recv on hand-made fields: a bytea written by COPY (FORMAT binary)
-- is read back into an spvec column
CREATE TEMP TABLE recv_any (v spvec);
CREATE TEMP TABLE recv_5 (v spvec(5));
CREATE FUNCTION pg_temp.recv(path text, tab text, b bytea) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE format('TRUNCATE %I', tab);
	EXECUTE format('COPY (SELECT %L::bytea) TO %L (FORMAT binary)', b, path);
	EXECUTE format('COPY %I FROM %L (FORMAT binary)', tab, path);
	EXECUTE format('SELECT v::text FROM %I', tab) INTO r;
	RETURN 'ok: ' || r;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- h(dim, nnz, unused) || indices || values
CREATE FUNCTION pg_temp.h(int, int, int) RETURNS bytea LANGUAGE sql
  AS $$ SELECT int4send($1) || int4send($2) || int4send($3) $$;
CREATE FUNCTION pg_temp.i(int) RETURNS bytea LANGUAGE sql
  AS $$ SELECT int4send($1) $$;
CREATE FUNCTION pg_temp.f(real) RETURNS bytea LANGUAGE sql
  AS $$ SELECT float4send($1) $$;

SELECT t AS "case", pg_temp.recv(:'spvec_recv', tab, b) AS result
FROM (VALUES
  ('valid', 'recv_any', pg_temp.h(4, 2, 0) || pg_temp.i(1) || pg_temp.i(3) || pg_temp.f(1.5) || pg_temp.f(-2)),
  ('valid, empty', 'recv_any', pg_temp.h(3, 0, 0)),
  ('valid, typmod', 'recv_5', pg_temp.h(5, 1, 0) || pg_temp.i(4) || pg_temp.f(1)),
  ('typmod mismatch', 'recv_5', pg_temp.h(4, 1, 0) || pg_temp.i(3) || pg_temp.f(1)),
  ('dim 0', 'recv_any', pg_temp.h(0, 0, 0)),
  ('dim -5', 'recv_any', pg_temp.h(-5, 0, 0)),
  ('dim too large', 'recv_any', pg_temp.h(1000000001, 0, 0)),
  ('nnz -1', 'recv_any', pg_temp.h(3, -1, 0)),
  ('nnz > dim', 'recv_any', pg_temp.h(1, 2, 0) || pg_temp.i(0) || pg_temp.i(1) || pg_temp.f(1) || pg_temp.f(1)),
  ('nnz beyond the data', 'recv_any', pg_temp.h(1000000000, 100000000, 0)),
  ('unused not 0', 'recv_any', pg_temp.h(3, 0, 1)),
  ('index -1', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(-1) || pg_temp.f(1)),
  ('index = dim', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(3) || pg_temp.f(1)),
  ('indices descending', 'recv_any', pg_temp.h(3, 2, 0) || pg_temp.i(2) || pg_temp.i(1) || pg_temp.f(1) || pg_temp.f(1)),
  ('index duplicated', 'recv_any', pg_temp.h(3, 2, 0) || pg_temp.i(1) || pg_temp.i(1) || pg_temp.f(1) || pg_temp.f(1)),
  ('zero value', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(0) || pg_temp.f(0)),
  ('negative zero', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(0) || pg_temp.f('-0')),
  ('NaN', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(0) || pg_temp.f('NaN')),
  ('Infinity', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(0) || pg_temp.f('Infinity')),
  ('value missing', 'recv_any', pg_temp.h(3, 1, 0) || pg_temp.i(0)),
  ('header short', 'recv_any', pg_temp.i(3) || pg_temp.i(0)),
  ('bytes left over', 'recv_any', pg_temp.h(3, 0, 0) || pg_temp.i(0))
) AS c(t, tab, b);

DROP TABLE tm, dense, rs, rp, big, big2, bin_src, bin_dst, recv_any, recv_5;
-- empty the files (COPY cannot remove them): 1.9 MB would stay in results/
COPY (SELECT WHERE false) TO :'spvec_bin';
COPY (SELECT WHERE false) TO :'spvec_recv';
