# A physical standby built by pg_basebackup searches with its indexes: the
# ordered scans and the batch functions of gpuivf and gpusparse answer what
# the standby's own sequential scan and the primary answer, and keep doing
# so as replay brings inserts, deletes and VACUUMs; WAL that does not touch
# an index leaves its store alone.  A promoted standby's index takes writes
# and searches like a primary's.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $primary = GpuindexTest::new_node('primary', allows_streaming => 1);
$primary->start;
GpuindexTest::create_table($primary, 4000, 25);
GpuindexTest::create_sparse_table($primary, 2000, 0.3);
$primary->safe_psql('postgres', 'CREATE TABLE other (x int);');
$primary->backup('b1');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;

sub sparse_answers
{
	return GpuindexTest::sparse_answers(@_);
}

# the batch functions' answers, one line per query
sub batch_answers
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q(SET gpuivf.probes = 10000;
SELECT string_agg(ids, E'\n' ORDER BY query) FROM (
  SELECT query, string_agg(key::text, ',' ORDER BY ord) AS ids
  FROM gpuivf_search('t_v_idx', (SELECT array_agg(v ORDER BY q) FROM qs), 10, 'id', NULL::int)
	   WITH ORDINALITY AS r(query, key, distance, ord)
  GROUP BY query) x;
SELECT string_agg(ids, E'\n' ORDER BY query) FROM (
  SELECT query, string_agg(key::text, ',' ORDER BY ord) AS ids
  FROM gpusparse_search('s_v', (SELECT array_agg(q ORDER BY qid) FROM queries), 10, 'id', NULL::int)
	   WITH ORDINALITY AS r(query, key, distance, ord)
  GROUP BY query) x;));
}

sub loads
{
	my ($node, $index) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(loads), 0) FROM gpuindex_stats WHERE index_name = '$index'");
}

# each round: the standby's index answers equal its sequential scan's and the
# primary's, for ordered scans and for the batch functions
sub compare
{
	my ($what) = @_;
	$primary->wait_for_catchup($standby);
	my $expected = GpuindexTest::answers($primary, 0);
	is(GpuindexTest::answers($standby, 0), $expected, "$what: standby sequential scan equals the primary's");
	is(GpuindexTest::answers($standby, 1), $expected, "$what: standby gpuivf scan equals the primary's");
	is(GpuindexTest::all_ids_by_index($standby), GpuindexTest::all_ids_by_seqscan($standby),
		"$what: standby gpuivf scan returns exactly the rows of a sequential scan");
	my $sparse = sparse_answers($standby, 0);
	is($sparse, sparse_answers($primary, 0), "$what: standby sparse sequential scan equals the primary's");
	is(sparse_answers($standby, 1), $sparse, "$what: standby gpusparse scan equals its sequential scan");
	is(batch_answers($standby), batch_answers($primary), "$what: standby batch functions equal the primary's");
	return;
}

# changes after the backup reach the standby by replay only
$primary->safe_psql('postgres', q(
INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
  FROM generate_series(4001, 4600) i;
DELETE FROM t WHERE id % 9 = 0;
VACUUM (INDEX_CLEANUP ON) t;
));
compare('after the backup');
is(GpuindexTest::plan_uses_index($standby), 1, 'standby: the ordered query uses the gpuivf index');
like($standby->safe_psql('postgres', q(SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM s ORDER BY v <#> (SELECT q FROM queries WHERE qid = 1) LIMIT 10;)),
	qr/s_v/, 'standby: the ordered sparse query uses the gpusparse index');

# rows near the queries arrive on the primary: the loaded stores must follow
$primary->safe_psql('postgres', q(
INSERT INTO t SELECT 20000 + q, v FROM qs;
INSERT INTO s SELECT 20000 + qid, q FROM queries;
DELETE FROM t WHERE id % 7 = 0;
DELETE FROM s WHERE id % 5 = 0;
VACUUM (INDEX_CLEANUP ON) t;
VACUUM (INDEX_CLEANUP ON) s;
INSERT INTO s SELECT i, rnd() FROM generate_series(2001, 2300) i;
));
compare('after inserts, deletes and VACUUM');
like($standby->safe_psql('postgres', q(SET enable_seqscan = off;
SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 3) LIMIT 1) x;)),
	qr/^20003$/, 'standby: a row inserted on the primary is the nearest on the standby');

# WAL that touches other relations only: the stores are not reloaded
my $ivf_loads = loads($standby, 't_v_idx');
my $sparse_loads = loads($standby, 's_v');
$primary->safe_psql('postgres', q(
INSERT INTO other SELECT generate_series(1, 5000);
UPDATE other SET x = x + 1;
));
compare('after writes to another table');
is(loads($standby, 't_v_idx'), $ivf_loads, 'unrelated WAL: the gpuivf store is not reloaded');
is(loads($standby, 's_v'), $sparse_loads, 'unrelated WAL: the gpusparse store is not reloaded');

# and one that does change is reloaded, once per change
$primary->safe_psql('postgres', q(INSERT INTO t VALUES (30000, (SELECT v FROM qs WHERE q = 5));));
compare('after one insert');
cmp_ok(loads($standby, 't_v_idx'), '>', $ivf_loads, 'a changed index: the gpuivf store is reloaded');

# stores of an index and of a database that the primary drops leave the
# standby's service: replay runs no drop hook, the service looks for their files
$primary->safe_psql('postgres', q(
CREATE TABLE gone (id int, v real[]);
INSERT INTO gone SELECT i, ARRAY[i % 7, i % 5]::real[] FROM generate_series(1, 500) i;
CREATE INDEX gone_v ON gone USING gpuivf (v) WITH (lists = 4);
CREATE DATABASE gonedb;
));
$primary->safe_psql('gonedb', q(
CREATE EXTENSION gpuindex;
CREATE TABLE g2 (id int, v real[]);
INSERT INTO g2 SELECT i, ARRAY[i % 3, i % 11]::real[] FROM generate_series(1, 500) i;
CREATE INDEX g2_v ON g2 USING gpuivf (v) WITH (lists = 4);
));
$primary->wait_for_catchup($standby);
my $gone_oid = $standby->safe_psql('postgres', q(SELECT 'gone_v'::regclass::oid));
my $gonedb_oid = $standby->safe_psql('postgres', q(SELECT oid FROM pg_database WHERE datname = 'gonedb'));
my $nearest = q(SET enable_seqscan = off; SELECT count(*) FROM (SELECT id FROM %s ORDER BY v <-> '{1,1}' LIMIT 3) x;);
is($standby->safe_psql('postgres', sprintf($nearest, 'gone')), 3, 'standby: the index to be dropped answers');
is($standby->safe_psql('gonedb', sprintf($nearest, 'g2')), 3, 'standby: the database to be dropped answers');
my $stores_of = "SELECT count(*) FROM gpuindex_stats WHERE indexrelid = $gone_oid OR dbid = $gonedb_oid";
is($standby->safe_psql('postgres', $stores_of), 2, 'standby: both are held by the service');
$primary->safe_psql('postgres', 'DROP TABLE gone;');
$primary->safe_psql('postgres', 'DROP DATABASE gonedb;');
$primary->wait_for_catchup($standby);
ok($standby->poll_query_until('postgres', "SELECT ($stores_of) = 0"),
	'standby: the stores of a dropped index and database are dropped after replay');

# promotion: the standby becomes a primary whose index takes writes; a change
# replayed after the standby's last search must not be lost by its stores
$primary->safe_psql('postgres', q(
INSERT INTO t VALUES (40000, (SELECT v FROM qs WHERE q = 7));
INSERT INTO s VALUES (40000, (SELECT q FROM queries WHERE qid = 7));
));
$primary->wait_for_catchup($standby);
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';
$standby->safe_psql('postgres', q(
INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
  FROM generate_series(10001, 10300) i;
DELETE FROM t WHERE id % 11 = 0;
VACUUM (INDEX_CLEANUP ON) t;
INSERT INTO s SELECT i, rnd() FROM generate_series(10001, 10300) i;
DELETE FROM s WHERE id % 11 = 0;
VACUUM (INDEX_CLEANUP ON) s;
));
is(GpuindexTest::plan_uses_index($standby), 1, 'promoted: the ordered query uses the gpuivf index');
# the rows inserted last before the promotion, for query 7: by index and by scan
sub q7_answers
{
	my ($use_index) = @_;
	my $settings = $use_index
	  ? 'SET enable_seqscan = off; SET enable_sort = off; SET gpuivf.probes = 10000;'
	  : 'SET enable_indexscan = off;';
	my $order = $use_index ? '' : ', ctid';
	return $standby->safe_psql('postgres', qq($settings
SELECT (SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 7)$order LIMIT 3) x)
	|| ' ' || (SELECT string_agg(id::text, ',') FROM (SELECT id FROM s ORDER BY v <#> (SELECT q FROM queries WHERE qid = 7)$order LIMIT 3) x);));
}
my $q7 = q7_answers(0);
like($q7, qr/40000.* .*40000/, 'promoted: the rows inserted last are among the best three');
is(q7_answers(1), $q7, 'promoted: rows replayed after the last standby search are found by the indexes');
is(GpuindexTest::all_ids_by_index($standby), GpuindexTest::all_ids_by_seqscan($standby),
	'promoted: after writes the index returns exactly the rows of a sequential scan');
is(GpuindexTest::answers($standby, 1), GpuindexTest::answers($standby, 0),
	'promoted: nearest rows equal a sequential scan');
is(sparse_answers($standby, 1), sparse_answers($standby, 0),
	'promoted: gpusparse answers equal a sequential scan');

$standby->stop;
$primary->stop;
done_testing();
