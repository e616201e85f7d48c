# Crash recovery: a backend killed with SIGKILL and an immediate shutdown,
# both during an insert storm, lose no committed row, and after recovery the index (reloaded from its WAL-replayed
# pages) returns exactly the rows a sequential scan returns.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('crash');
$node->start;
GpuindexTest::create_table($node, 3000, 20);
$node->safe_psql('postgres', q(
CREATE TABLE committed (id int PRIMARY KEY);
CREATE PROCEDURE storm(first int, n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN first .. first + n - 1 LOOP
	INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0);
	INSERT INTO committed VALUES (i);
	COMMIT;
  END LOOP;
END $$;
));
is(GpuindexTest::answers($node, 1), GpuindexTest::answers($node, 0),
	'index answers equal a sequential scan before the crash');

# two sessions inserting, each row committed on its own
my $storm_first = 100000;
sub start_storms
{
	my @h;
	for my $s (0 .. 1)
	{
		push @h, IPC::Run::start(
			[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
			  "CALL storm($storm_first, 1000000)" ],
			'>', \my $out, '2>', \my $err);
		$storm_first += 1000000;
	}
	return @h;
}

# crash 1: kill -9 of an inserting backend; the postmaster resets everything
my @storms = start_storms();
$node->poll_query_until('postgres', 'SELECT count(*) >= 200 FROM committed')
  or die 'the insert storm did not start';
my $victim = $node->safe_psql('postgres',
	q(SELECT pid FROM pg_stat_activity WHERE query LIKE 'CALL storm%' LIMIT 1));
kill 'KILL', $victim;
$_->finish for @storms;
$node->poll_query_until('postgres', 'SELECT true') or die 'no restart after the crash';
is(GpuindexTest::all_ids_by_index($node), GpuindexTest::all_ids_by_seqscan($node),
	'after a backend crash the index returns exactly the rows of a sequential scan');

# crash 2: an immediate shutdown (no checkpoint) in the middle of the storm
@storms = start_storms();
$node->poll_query_until('postgres', 'SELECT count(*) >= 600 FROM committed')
  or die 'the insert storm did not restart';
$node->stop('immediate');
$_->finish for @storms;
$node->start;

my $committed = $node->safe_psql('postgres', 'SELECT count(*) FROM committed');
my $missing = $node->safe_psql('postgres',
	'SELECT count(*) FROM committed c WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.id = c.id)');
ok($committed >= 600, "rows committed before the crash ($committed)");
is($missing, '0', 'no committed row lost by the crash');
is(GpuindexTest::all_ids_by_index($node), GpuindexTest::all_ids_by_seqscan($node),
	'after recovery the index returns exactly the rows of a sequential scan');
is(GpuindexTest::answers($node, 1), GpuindexTest::answers($node, 0),
	'after recovery the nearest rows equal a sequential scan');

# and the index keeps working: insert, delete, vacuum, search
$node->safe_psql('postgres', q(
INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
  FROM generate_series(50001, 50500) i;
DELETE FROM t WHERE id % 5 = 0;
VACUUM (INDEX_CLEANUP ON) t;
));
is(GpuindexTest::all_ids_by_index($node), GpuindexTest::all_ids_by_seqscan($node),
	'inserts, deletes and VACUUM after recovery keep index = sequential scan');

# crash 3: right after two VACUUMs, the first after a checkpoint (its pages
# logged whole), the second on pages already changed since (logged as
# changes); the replayed pages must hold exactly the surviving rows
$node->safe_psql('postgres', q(
CHECKPOINT;
DELETE FROM t WHERE id % 7 = 0;
VACUUM (INDEX_CLEANUP ON) t;
DELETE FROM t WHERE id % 11 = 0;
VACUUM (INDEX_CLEANUP ON) t;
));
$node->stop('immediate');
$node->start;
is(GpuindexTest::all_ids_by_index($node), GpuindexTest::all_ids_by_seqscan($node),
	'after a crash right after two VACUUMs the index returns exactly the rows of a sequential scan');
is(GpuindexTest::answers($node, 1), GpuindexTest::answers($node, 0),
	'and its nearest rows equal a sequential scan');

$node->stop;
done_testing();
