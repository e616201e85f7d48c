# Helpers shared by gpuindex's TAP tests: a node with gpuindex preloaded, a
# seeded table with a gpuivf index, and answers from the index next to the
# answers of a sequential scan (the independent reference).
package GpuindexTest;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;

# a node with gpuindex in shared_preload_libraries on the device under test
sub new_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%opts);
	my $device = $ENV{GPUINDEX_TEST_DEVICE} // 'cpu';
	$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'gpuindex'
gpuindex.device = $device
fsync = off
restart_after_crash = on
));
	# GPUINDEX_TEST_CONF: more settings for every test cluster (test/lib.sh)
	$node->append_conf('postgresql.conf', $ENV{GPUINDEX_TEST_CONF})
	  if $ENV{GPUINDEX_TEST_CONF};
	return $node;
}

# table t(id, v real[16]) with n seeded rows and a gpuivf index of `lists` lists
sub create_table
{
	my ($node, $n, $lists) = @_;
	$node->safe_psql('postgres', qq(
CREATE EXTENSION IF NOT EXISTS gpuindex;
SELECT setseed(0.42);
CREATE TABLE t (id int PRIMARY KEY, v real[]);
INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
  FROM generate_series(1, $n) i;
CREATE TABLE qs AS SELECT q, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE q > 0) AS v
  FROM generate_series(1, 10) q;
CREATE INDEX t_v_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = $lists);
));
	return;
}

# table s(id, v spvec(300)) with n seeded rows of up to 30 Zipf-like terms, a
# gpusparse index s_v, 20 queries in queries(qid, q), and rnd() for more rows
sub create_sparse_table
{
	my ($node, $n, $seed) = @_;
	$node->safe_psql('postgres', qq(
CREATE EXTENSION IF NOT EXISTS gpuindex;
SELECT setseed($seed);
CREATE FUNCTION rnd() RETURNS spvec LANGUAGE sql VOLATILE AS \$\$
	SELECT spvec(coalesce(array_agg(t), '{}'), coalesce(array_agg((random() * 3)::real), '{}'), 300)
	FROM (SELECT DISTINCT 1 + (random() * random() * 299)::int AS t
		  FROM generate_series(1, (random() * 30)::int)) s
\$\$;
CREATE TABLE s (id int, v spvec(300));
INSERT INTO s SELECT i, rnd() FROM generate_series(1, $n) i;
CREATE INDEX s_v ON s USING gpusparse (v);
CREATE TABLE queries (qid int, q spvec);
INSERT INTO queries SELECT i, rnd() FROM generate_series(1, 20) i;
));
	return;
}

# every sparse query's top 10 plus the whole table in order for query 1, with
# the index or by a sequential scan (ties by TID there, as the index breaks them)
sub sparse_answers
{
	my ($node, $use_index) = @_;
	my $settings = $use_index
	  ? 'SET enable_seqscan = off; SET enable_sort = off;'
	  : 'SET enable_indexscan = off;';
	my $order = $use_index ? '' : ', ctid';
	return $node->safe_psql('postgres', qq($settings
SELECT qid, (SELECT array_agg(id) FROM (SELECT id FROM s ORDER BY v <#> q$order LIMIT 10) x)
FROM queries ORDER BY qid;
SELECT array_agg(id) FROM (SELECT id FROM s ORDER BY v <#> (SELECT q FROM queries WHERE qid = 1)$order) x;
));
}

# the 10 nearest ids of every query, with the index (all lists probed) or by a
# sequential scan (ties by TID there, as the index breaks them); one line per
# query.  Dies if the index's query is not planned on the index.
sub answers
{
	my ($node, $use_index) = @_;
	my $settings = $use_index
	  ? 'SET gpuivf.probes = 10000; SET enable_seqscan = off; SET enable_sort = off;'
	  : 'SET enable_indexscan = off; SET enable_bitmapscan = off;';
	my $order = $use_index ? '' : ', ctid';
	my $query = qq(SELECT string_agg(ids, E'\\n' ORDER BY q) FROM (
  SELECT q, (SELECT string_agg(id::text, ',') FROM
			   (SELECT id FROM t ORDER BY v <-> qs.v$order LIMIT 10) s) AS ids
  FROM qs) x;);
	if ($use_index)
	{
		my $plan = $node->safe_psql('postgres', "$settings EXPLAIN (COSTS OFF) $query");
		die "the index's answers are not planned on the index:\n$plan"
		  unless $plan =~ /Index Scan using t_v_idx/;
	}
	return $node->safe_psql('postgres', "$settings $query");
}

# ids the index returns when asked for every row, sorted
sub all_ids_by_index
{
	my ($node) = @_;
	return $node->safe_psql('postgres', qq(SET gpuivf.probes = 10000; SET enable_seqscan = off;
SELECT string_agg(id::text, ',' ORDER BY id) FROM
  (SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 100000000) s;));
}

sub all_ids_by_seqscan
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT string_agg(id::text, \',\' ORDER BY id) FROM t;');
}

# a backend killed with SIGKILL while it runs the DO block $do (inserts, a
# COMMIT each), once $started is true; returns when the postmaster has reset
# every process and the server answers again
sub kill_backend_during
{
	my ($node, $do, $started) = @_;
	my ($out, $err);
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', $do ],
		'>', \$out, '2>', \$err);
	$node->poll_query_until('postgres', $started)
	  or die 'the inserts did not start';
	my $victim = $node->safe_psql('postgres',
		q(SELECT pid FROM pg_stat_activity WHERE query LIKE 'DO $$ BEGIN FOR%' LIMIT 1));
	kill 'KILL', $victim;
	$h->finish;
	$node->poll_query_until('postgres', 'SELECT true') or die 'no restart after the crash';
	return;
}

# does the plan of an ordered query use the gpuivf index?
sub plan_uses_index
{
	my ($node) = @_;
	my $plan = $node->safe_psql('postgres', q(SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 10;));
	return $plan =~ /t_v_idx/ ? 1 : 0;
}

1;
