--
-- Distance functions and operators on real[]: <-> (L2), <#> (negative inner
-- product), <=> (cosine distance).  Expected values are computed by hand or
-- with Python (quoted in comments), and a seeded random set is checked
-- against the same formulas written in plain SQL.
--
CREATE EXTENSION IF NOT EXISTS gpuindex;

-- the operators exist on (real[], real[]), each its own commutator
SELECT oprname, oprcode, oprcom::regoperator, oprresult::regtype
FROM pg_operator
WHERE oprleft = 'real[]'::regtype AND oprright = 'real[]'::regtype
  AND oprname IN ('<->', '<#>', '<=>')
ORDER BY oprname;

--
-- Hand-checked values
--
-- {1,2,3} vs {4,6,8}: differences 3,4,5 -> L2^2 = 9+16+25 = 50,
-- L2 = sqrt(50) = 7.0710678118654755; ip = 4+12+24 = 40;
-- cosine = 1 - 40/sqrt(14*116) = 0.007416666029069763
SELECT '{1,2,3}'::real[] <-> '{4,6,8}'::real[] AS l2,
       l2_distance('{1,2,3}', '{4,6,8}') AS l2_fn,
       l2_squared_distance('{1,2,3}', '{4,6,8}') AS l2sq,
       inner_product('{1,2,3}', '{4,6,8}') AS ip,
       '{1,2,3}'::real[] <#> '{4,6,8}'::real[] AS neg_ip,
       negative_inner_product('{1,2,3}', '{4,6,8}') AS neg_ip_fn,
       '{1,2,3}'::real[] <=> '{4,6,8}'::real[] AS cos,
       cosine_distance('{1,2,3}', '{4,6,8}') AS cos_fn;

-- identical vectors: all distances 0, <#> = -|a|^2 = -(1+4+9) = -14
SELECT '{1,2,3}'::real[] <-> '{1,2,3}'::real[] AS l2,
       '{1,2,3}'::real[] <#> '{1,2,3}'::real[] AS neg_ip,
       '{1,2,3}'::real[] <=> '{1,2,3}'::real[] AS cos;

-- parallel (cos 0), opposite (cos 2), orthogonal (cos 1, <#> 0 and not -0)
SELECT '{1,2}'::real[] <=> '{2,4}'::real[] AS parallel,
       '{1,2}'::real[] <=> '{-2,-4}'::real[] AS opposite,
       '{1,0}'::real[] <=> '{0,1}'::real[] AS orthogonal,
       '{1,0}'::real[] <#> '{0,1}'::real[] AS neg_ip_orth,
       inner_product('{1,0}', '{0,1}') AS ip_orth;

-- mixed signs and fractions exact in float4: a = {0.5,-1.5,2.25},
-- b = {-0.25,0.5,4}: diffs 0.75,-2,-1.75 -> L2^2 = 0.5625+4+3.0625 = 7.625;
-- ip = -0.125-0.75+9 = 8.125
SELECT l2_squared_distance('{0.5,-1.5,2.25}', '{-0.25,0.5,4}') AS l2sq,
       '{0.5,-1.5,2.25}'::real[] <#> '{-0.25,0.5,4}'::real[] AS neg_ip;

-- elements are float4: 0.1 is stored as 0.10000000149011612
SELECT '{0.1}'::real[] <-> '{0}'::real[] AS l2;

-- one dimension; and lower bounds other than 1 are accepted
SELECT '{-3}'::real[] <-> '{4}'::real[] AS l2_1d,
       '[0:2]={1,2,3}'::real[] <-> '{4,6,8}'::real[] AS l2_lbound;

-- large float4 values do not overflow (accumulation in double):
-- |3e38 - -3e38| ~ 6e38 > FLT_MAX; squares ~ 3.6e77
SELECT ('{3e38,-3e38}'::real[] <-> '{-3e38,3e38}'::real[]) / 6e38
         BETWEEN 1.4142 AND 1.4143 AS l2_large_ok,
       inner_product('{3e38,3e38}', '{3e38,3e38}') > 1.79e77 AS ip_large_ok,
       '{3e38,3e38}'::real[] <=> '{3e38,3e38}'::real[] AS cos_large,
       '{1e-38,1e-38}'::real[] <=> '{-2e-38,-2e-38}'::real[] AS cos_tiny;

-- the largest allowed dimension: 16000 ones vs zeros -> sqrt(16000)
-- = 126.49110640673517; ip = 16000
SELECT array_fill(1::real, ARRAY[16000]) <-> array_fill(0::real, ARRAY[16000])
         AS l2_16000,
       inner_product(array_fill(1::real, ARRAY[16000]),
                     array_fill(1::real, ARRAY[16000])) AS ip_16000;

--
-- Bad input: every case is an ERROR with a clear message, in either position
--
-- different dimensions
SELECT '{1,2,3}'::real[] <-> '{1,2}'::real[];
SELECT '{1}'::real[] <#> '{1,2}'::real[];
SELECT cosine_distance('{1,2}', '{1,2,3}');
-- NULL elements
SELECT '{1,NULL,3}'::real[] <-> '{1,2,3}'::real[];
SELECT '{1,2,3}'::real[] <=> '{NULL,2,3}'::real[];
SELECT inner_product('{NULL}', '{NULL}');
-- NaN, Infinity, -Infinity
SELECT '{1,NaN}'::real[] <-> '{1,2}'::real[];
SELECT '{1,2}'::real[] <#> '{NaN,2}'::real[];
SELECT '{Infinity,2}'::real[] <-> '{1,2}'::real[];
SELECT '{1,2}'::real[] <=> '{1,-Infinity}'::real[];
SELECT l2_squared_distance('{-Infinity}', '{1}');
-- empty arrays
SELECT '{}'::real[] <-> '{}'::real[];
SELECT '{1}'::real[] <-> '{}'::real[];
SELECT negative_inner_product('{}', '{1}');
-- multi-dimensional arrays
SELECT '{{1,2},{3,4}}'::real[] <-> '{1,2,3,4}'::real[];
SELECT '{1,2,3,4}'::real[] <=> '{{1,2},{3,4}}'::real[];
SELECT '{{1}}'::real[] <#> '{{1}}'::real[];
-- too many dimensions: 16001
SELECT array_fill(1::real, ARRAY[16001]) <-> array_fill(1::real, ARRAY[16001]);
SELECT inner_product('{1}', array_fill(1::real, ARRAY[16001]));
-- checks come before the dimension comparison: the first argument's NaN is
-- reported even though the dimensions differ too
SELECT '{NaN}'::real[] <-> '{1,2}'::real[];

-- NULL arguments: STRICT, so the result is NULL, not an error
SELECT NULL::real[] <-> '{1,2}'::real[] IS NULL AS l2_null,
       '{1,2}'::real[] <#> NULL::real[] IS NULL AS ip_null,
       NULL::real[] <=> NULL::real[] IS NULL AS cos_null,
       l2_squared_distance(NULL, '{1}') IS NULL AS l2sq_null,
       inner_product('{1}', NULL) IS NULL AS ipfn_null;

-- cosine distance with a zero vector is undefined: NaN, like pgvector
SELECT '{0,0}'::real[] <=> '{1,2}'::real[] AS cos_zero_left,
       '{1,2}'::real[] <=> '{0,0}'::real[] AS cos_zero_right,
       '{0,0}'::real[] <=> '{0,0}'::real[] AS cos_zero_both,
       '{0,0}'::real[] <-> '{0,0}'::real[] AS l2_zero,
       '{0,0}'::real[] <#> '{1,2}'::real[] AS neg_ip_zero;

--
-- Seeded random vectors checked against plain-SQL formulas
--
SELECT setseed(0.42);

-- 240 vectors of dimensions 1, 2, 3, 17, 128 and 1000, values in [-1,1)
-- scaled by 10^-3 .. 10^3 so magnitudes vary across vectors
CREATE TEMP TABLE rv AS
SELECT id, dim,
       array_agg(((random() * 2 - 1) * 10.0 ^ (id % 7 - 3))::real ORDER BY j)
         AS v
FROM (SELECT id, (ARRAY[1, 2, 3, 17, 128, 1000])[1 + id % 6] AS dim
      FROM generate_series(1, 240) AS id) AS d,
     generate_series(1, dim) AS j
GROUP BY id, dim;

SELECT dim, count(*) AS vectors,
       bool_and(array_length(v, 1) = dim) AS dims_ok
FROM rv GROUP BY dim ORDER BY dim;

-- all pairs of equal dimension, with the reference sums computed element by
-- element in float8 from the same float4 values
CREATE TEMP TABLE ref AS
SELECT a.id AS ida, b.id AS idb, a.v AS va, b.v AS vb,
       (SELECT sum((x::float8 - y::float8) ^ 2)
          FROM unnest(a.v) WITH ORDINALITY AS ua(x, i)
          JOIN unnest(b.v) WITH ORDINALITY AS ub(y, k) ON i = k) AS l2sq,
       (SELECT sum(x::float8 * y::float8)
          FROM unnest(a.v) WITH ORDINALITY AS ua(x, i)
          JOIN unnest(b.v) WITH ORDINALITY AS ub(y, k) ON i = k) AS ip,
       (SELECT sum(x::float8 ^ 2) FROM unnest(a.v) AS ua(x)) AS na,
       (SELECT sum(y::float8 ^ 2) FROM unnest(b.v) AS ub(y)) AS nb
FROM rv a JOIN rv b ON a.dim = b.dim AND a.id <= b.id;

-- relative error 1e-5, with an absolute floor for results that are ~0
CREATE FUNCTION pg_temp.close(got float8, want float8) RETURNS boolean
  LANGUAGE sql IMMUTABLE
  AS $$ SELECT abs(got - want) <= 1e-5 * abs(want) + 1e-12 $$;

SELECT count(*) AS pairs,
       count(*) FILTER (WHERE ida = idb) AS self_pairs,
       bool_and(pg_temp.close(va <-> vb, sqrt(l2sq))) AS l2_ok,
       bool_and(pg_temp.close(l2_squared_distance(va, vb), l2sq)) AS l2sq_ok,
       bool_and(pg_temp.close(inner_product(va, vb), ip)) AS ip_ok,
       bool_and(pg_temp.close(va <#> vb, -ip)) AS neg_ip_ok,
       bool_and(pg_temp.close(va <=> vb,
                              1 - greatest(-1, least(1, ip / sqrt(na * nb)))))
         AS cos_ok
FROM ref;

-- the operators commute exactly, <#> is exactly -inner_product, and
-- <-> is exactly sqrt(l2_squared_distance)
SELECT bool_and((va <-> vb) = (vb <-> va)) AS l2_commutes,
       bool_and((va <#> vb) = (vb <#> va)) AS neg_ip_commutes,
       bool_and((va <=> vb) = (vb <=> va)) AS cos_commutes,
       bool_and((va <#> vb) = -inner_product(va, vb)) AS neg_ip_exact,
       bool_and((va <-> vb) = sqrt(l2_squared_distance(va, vb))) AS l2_exact,
       bool_and((va <=> vb) BETWEEN 0 AND 2) AS cos_in_range
FROM ref;

-- self pairs: L2 exactly 0, cosine ~0, <#> = -|v|^2
SELECT bool_and((va <-> vb) = 0) AS l2_self_zero,
       bool_and(abs(va <=> vb) < 1e-12) AS cos_self_zero,
       bool_and(pg_temp.close(va <#> vb, -na)) AS neg_ip_self
FROM ref WHERE ida = idb;

-- the 5 nearest neighbours of vector 5 (dim 1000) by <-> agree with an
-- ORDER BY on the reference values
SELECT (SELECT array_agg(idb ORDER BY d, idb) FROM
          (SELECT idb, va <-> vb AS d FROM ref WHERE ida = 5
           UNION ALL SELECT ida, va <-> vb FROM ref WHERE idb = 5 AND ida <> 5
           ORDER BY 2, 1 LIMIT 5) s)
       = (SELECT array_agg(id ORDER BY d, id) FROM
          (SELECT idb AS id, l2sq AS d FROM ref WHERE ida = 5
           UNION ALL SELECT ida, l2sq FROM ref WHERE idb = 5 AND ida <> 5
           ORDER BY 2, 1 LIMIT 5) s) AS knn_matches_ref;

--
-- ORDER BY v <op> q LIMIT k on a small table; q = {0.75,0.25}.
-- By hand: L2^2 = 1: 0.625, 2: 0.125, 3: 11.125, 4: 3.625, 5: 4.625,
-- 6: 9.125; -ip = 1: 0, 2: -0.75, 3: -3.25, 4: -0.5, 5: 1, 6: -2.25;
-- cosine (Python, rounded) = 1: NaN, 2: 0.051317, 3: 0.002946,
-- 4: 0.683772, 5: 1.894427, 6: 0.210648; row 7 is NULL (sorts last).
--
CREATE TEMP TABLE pts (id int, v real[]);
INSERT INTO pts VALUES
  (1, '{0,0}'), (2, '{1,0}'), (3, '{4,1}'), (4, '{0,2}'),
  (5, '{-1,-1}'), (6, '{2,3}'), (7, NULL);

SELECT id, round((v <-> '{0.75,0.25}')::numeric, 6) AS l2
FROM pts ORDER BY v <-> '{0.75,0.25}' LIMIT 3;

SELECT id, v <-> '{0.75,0.25}' IS NULL AS is_null,
       round(l2_squared_distance(v, '{0.75,0.25}')::numeric, 6) AS l2sq
FROM pts ORDER BY v <-> '{0.75,0.25}';

SELECT id, v <#> '{0.75,0.25}' AS neg_ip
FROM pts ORDER BY v <#> '{0.75,0.25}' LIMIT 4;

SELECT id, round((v <=> '{0.75,0.25}')::numeric, 6) AS cos
FROM pts ORDER BY v <=> '{0.75,0.25}';

-- the query vector on the left gives the same order
SELECT array_agg(id) AS by_l2_left
FROM (SELECT id FROM pts ORDER BY '{0.75,0.25}' <-> v LIMIT 6) s;

-- a bad query vector fails the scan instead of being ignored
SELECT id FROM pts ORDER BY v <-> '{0.75,0.25,1}' LIMIT 1;

-- a pgvector-style literal gets a hint (other malformed arrays do not)
SELECT id FROM pts ORDER BY v <-> '[0.75,0.25]' LIMIT 1;
SELECT id FROM pts ORDER BY v <-> '{0.75,0.25' LIMIT 1;

DROP TABLE pts, ref, rv;
