# gpusparse after crashes: an immediate shutdown after inserts, deletes and
# a VACUUM, and a backend killed with SIGKILL while inserting; after each,
# the store (reloaded from the WAL-replayed pages) answers exactly what a
# sequential scan answers, for top-k and for the whole table in order.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('sparse');
$node->start;
$node->safe_psql('postgres', q(
CREATE EXTENSION gpuindex;
SELECT setseed(0.7);
CREATE FUNCTION rnd() RETURNS spvec LANGUAGE sql VOLATILE AS $$
	SELECT spvec(coalesce(array_agg(t), '{}'), coalesce(array_agg((random() * 3)::real), '{}'), 300)
	FROM (SELECT DISTINCT 1 + (random() * random() * 299)::int AS t
		  FROM generate_series(1, (random() * 30)::int)) s
$$;
CREATE TABLE s (id int, v spvec(300));
INSERT INTO s SELECT i, rnd() FROM generate_series(1, 3000) i;
CREATE INDEX s_v ON s USING gpusparse (v);
CREATE TABLE queries (qid int, q spvec);
INSERT INTO queries SELECT i, rnd() FROM generate_series(1, 20) i;
));

# every query's top 10 plus the whole table in order for one query
sub answers
{
	my ($index) = @_;
	my $set = $index
	  ? 'SET enable_seqscan = off; SET enable_sort = off;'
	  : 'SET enable_indexscan = off;';
	my $order = $index ? '' : ', ctid';
	return $node->safe_psql('postgres', qq(
$set
SELECT qid, (SELECT array_agg(id) FROM (SELECT id FROM s ORDER BY v <#> q$order LIMIT 10) x)
FROM queries ORDER BY qid;
SELECT array_agg(id) FROM (SELECT id FROM s ORDER BY v <#> (SELECT q FROM queries WHERE qid = 1)$order) x;
));
}

is(answers(1), answers(0), 'index answers equal a sequential scan');

$node->safe_psql('postgres', q(
INSERT INTO s SELECT i, rnd() FROM generate_series(3001, 4000) i;
DELETE FROM s WHERE id % 4 = 0;
VACUUM (INDEX_CLEANUP ON) s;
INSERT INTO s SELECT i, rnd() FROM generate_series(4001, 4500) i;
DELETE FROM s WHERE id % 9 = 0;
));
is(answers(1), answers(0), 'after inserts, deletes and VACUUM');

$node->stop('immediate');
$node->start;
is(answers(1), answers(0), 'after an immediate shutdown the reloaded store answers as before');

# a backend killed while inserting: the postmaster resets every process
my $h = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
	  q(DO $$ BEGIN FOR i IN 5000 .. 1000000 LOOP INSERT INTO s SELECT i, rnd(); COMMIT; END LOOP; END $$) ],
	'>', \my $out, '2>', \my $err);
$node->poll_query_until('postgres', 'SELECT count(*) > 4100 FROM s')
  or die 'the inserts did not start';
my $victim = $node->safe_psql('postgres',
	q(SELECT pid FROM pg_stat_activity WHERE query LIKE 'DO $$ BEGIN FOR%' LIMIT 1));
kill 'KILL', $victim;
$h->finish;
$node->poll_query_until('postgres', 'SELECT true') or die 'no restart after the crash';
is(answers(1), answers(0), 'after a backend crash');

$node->stop;
done_testing();
