# genie after restarts and crashes: a clean restart, an immediate shutdown
# after inserts, deletes and a VACUUM, and a backend killed with SIGKILL while
# inserting.  After each, the store (reloaded from the pages) must rank the
# rows as counts written in plain SQL do: for every query the reference
# counts of the rows the index returns, in its order, are the k best
# reference counts, and every row with a positive count is returned.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('genie');
$node->start;
$node->safe_psql('postgres', q(
CREATE EXTENSION IF NOT EXISTS gpuindex;
SELECT setseed(0.31);
CREATE FUNCTION rset() RETURNS int[] LANGUAGE sql VOLATILE AS $$
	SELECT ARRAY(SELECT 1 + (random() * random() * 199)::int
				 FROM generate_series(1, 1 + (random() * 12)::int))
$$;
CREATE FUNCTION rstr() RETURNS text LANGUAGE sql VOLATILE AS $$
	SELECT string_agg(substr('abcdefgh', 1 + (random() * 7)::int, 1), '')
	FROM generate_series(1, 3 + (random() * 20)::int)
$$;
CREATE FUNCTION ref_set(r int[], q int[]) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	SELECT count(DISTINCT x)::int FROM unnest(q) x WHERE x = ANY (r)
$$;
-- (gram, occurrence) pairs in common: the sum over grams of min(occurrences)
CREATE FUNCTION ref_grams(a text, b text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	WITH ga AS (SELECT substr(a, i, 3) g, count(*) c FROM generate_series(1, length(a) - 2) i GROUP BY 1),
		 gb AS (SELECT substr(b, i, 3) g, count(*) c FROM generate_series(1, length(b) - 2) i GROUP BY 1)
	SELECT coalesce(sum(least(ga.c, gb.c)), 0)::int FROM ga JOIN gb USING (g)
$$;
CREATE TABLE g (id int, tags int[], s text);
INSERT INTO g SELECT i, rset(), rstr() FROM generate_series(1, 3000) i;
CREATE INDEX g_tags ON g USING genie (tags) WITH (lists = 64);
CREATE INDEX g_s ON g USING genie (s genie_ngram_ops) WITH (lists = 64);
CREATE TABLE queries (qid int, tq int[], sq text);
INSERT INTO queries SELECT i, rset(), rstr() FROM generate_series(1, 12) i;
));

# one line per query and column: "ok" or what differs
sub check
{
	return $node->safe_psql('postgres', q(
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT qid, col,
	   CASE WHEN got IS NOT DISTINCT FROM want THEN 'ok' ELSE format('index %s, reference %s', got, want) END
FROM (
  SELECT qid, 'tags' AS col,
	(SELECT array_agg(ref_set(tags, tq) ORDER BY n) FROM
	   (SELECT tags, row_number() OVER () n FROM (SELECT tags FROM g ORDER BY tags <&> tq LIMIT 10) a) b) got,
	(SELECT array_agg(r ORDER BY r DESC) FROM
	   (SELECT ref_set(tags, tq) r FROM g ORDER BY 1 DESC LIMIT 10) c) want
  FROM queries
  UNION ALL
  SELECT qid, 's',
	(SELECT array_agg(ref_grams(s, sq) ORDER BY n) FROM
	   (SELECT s, row_number() OVER () n FROM (SELECT s FROM g ORDER BY s <%> sq LIMIT 10) a) b),
	(SELECT array_agg(r ORDER BY r DESC) FROM
	   (SELECT ref_grams(s, sq) r FROM g ORDER BY 1 DESC LIMIT 10) c)
  FROM queries
  UNION ALL
  SELECT qid, 'tags, every match',
	ARRAY[(SELECT count(*)::int FROM (SELECT tags FROM g ORDER BY tags <&> tq LIMIT 100000) a
		   WHERE ref_set(tags, tq) > 0)],
	ARRAY[(SELECT count(*)::int FROM g WHERE ref_set(tags, tq) > 0)]
  FROM queries WHERE qid <= 3) x
ORDER BY 1, 2;
));
}

sub all_ok
{
	my ($name) = @_;
	my $out = check();
	my @bad = grep { !/\|ok$/ } split /\n/, $out;
	ok(@bad == 0 && $out =~ /\|ok/, $name) or diag(join("\n", @bad));
	return;
}

# the queries are answered by the indexes
my $plan = $node->safe_psql('postgres', q(SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM g ORDER BY tags <&> '{1,2,3}' LIMIT 10;));
like($plan, qr/Index Scan using g_tags/, 'the set queries are planned on the index');
$plan = $node->safe_psql('postgres', q(SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM g ORDER BY s <%> 'abcab' LIMIT 10;));
like($plan, qr/Index Scan using g_s/, 'the string queries are planned on the index');

all_ok('index answers equal the plain-SQL counts');

$node->restart;
all_ok('after a clean restart the reloaded store answers as before');

$node->safe_psql('postgres', q(
INSERT INTO g SELECT i, rset(), rstr() FROM generate_series(3001, 4000) i;
DELETE FROM g WHERE id % 4 = 0;
CHECKPOINT;
VACUUM (INDEX_CLEANUP ON) g;
INSERT INTO g SELECT i, rset(), rstr() FROM generate_series(4001, 4500) i;
DELETE FROM g WHERE id % 9 = 0;
));
all_ok('after inserts, deletes and VACUUM');

$node->stop('immediate');
$node->start;
all_ok('after an immediate shutdown the reloaded store answers as before');

# a backend killed while inserting: the postmaster resets every process
GpuindexTest::kill_backend_during($node,
	q(DO $$ BEGIN FOR i IN 5000 .. 1000000 LOOP INSERT INTO g SELECT i, rset(), rstr(); COMMIT; END LOOP; END $$),
	'SELECT count(*) > 3050 FROM g');
all_ok('after a backend crash');

$node->stop;
done_testing();
