# gpusparse's dead-row log: while it has room, VACUUM records the dead rows'
# TIDs in the log and changes no page holding their items; the heap then
# reuses those TIDs for new rows.  The new rows must be alive and the logged
# ones dead for the running store, for ordered scans that read the pages
# (the whole table in order), after a restart and after a crash (the store
# reloaded from the pages and the log), and after the VACUUM that finds the
# log full, removes the logged items from the pages and empties the log.
# vacuum_log_limit = 0 changes the pages at every VACUUM.  The reference is
# a sequential scan; page LSNs and item counts come from pageinspect.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('deadlog');
$node->start;
GpuindexTest::create_sparse_table($node, 3000, 0.5);
$node->safe_psql('postgres', q(
CREATE EXTENSION pageinspect;
ALTER INDEX s_v SET (vacuum_log_limit = 30);
CREATE TABLE gone (t tid);
));

sub check
{
	my ($what) = @_;
	is(GpuindexTest::sparse_answers($node, 1), GpuindexTest::sparse_answers($node, 0),
		"$what: index answers equal a sequential scan");
	return;
}

sub sql { return $node->safe_psql('postgres', $_[0]); }

# every page's LSN, and the items on the index's pages (metapage's three aside)
sub lsns
{
	return sql(q(SELECT string_agg(b || ':' || (page_header(get_raw_page('s_v', b))).lsn, ' ' ORDER BY b)
	  FROM generate_series(0, pg_relation_size('s_v') / 8192 - 1) b));
}

sub items
{
	return sql(q(SELECT sum(greatest((page_header(get_raw_page('s_v', b))).lower - 24, 0) / 4) - 3
	  FROM generate_series(0, pg_relation_size('s_v') / 8192 - 1) b));
}

# delete the rows of `cond` (their TIDs remembered), VACUUM, insert n rows
sub round
{
	my ($cond, $first, $n) = @_;
	sql(qq(INSERT INTO gone SELECT ctid FROM s WHERE $cond;
DELETE FROM s WHERE $cond;
VACUUM (INDEX_CLEANUP ON) s;
INSERT INTO s SELECT i, rnd() FROM generate_series($first, $first + $n - 1) i;));
	return;
}

my $live = 'SELECT count(*) FROM s WHERE v IS NOT NULL';
my $items0 = items();
is($items0, sql($live), 'one item per row after the build');

# a VACUUM with room in its log: only the metapage and new (log) pages change
my $nblocks = sql(q(SELECT pg_relation_size('s_v') / 8192));
my %before = map { split /:/ } split / /, lsns();
sql(q(INSERT INTO gone SELECT ctid FROM s WHERE id % 10 = 3;
DELETE FROM s WHERE id % 10 = 3;
VACUUM (INDEX_CLEANUP ON) s;));
my %after = map { split /:/ } split / /, lsns();
my @changed = grep { $_ != 0 && $_ < $nblocks && $after{$_} ne $before{$_} } keys %before;
is(scalar(@changed), 0, 'a VACUUM with room in its log changes no page of the rows')
  or diag("changed: @changed");
is(items(), $items0 + 1, 'the dead rows keep their items (and the log has one item)');

sql(q(INSERT INTO s SELECT i, rnd() FROM generate_series(5001, 5300) i));
my $reused = sql(q(SELECT count(*) FROM s WHERE ctid IN (SELECT t FROM gone)));
cmp_ok($reused, '>', 100, 'the heap reused logged TIDs for new rows');
check('after a logging VACUUM and inserts at reused TIDs');

$node->restart;
check('after a restart (store reloaded from the pages and the log)');

# a second logging round, then a crash
round('id % 10 = 5', 6001, 300);
check('after a second logging VACUUM');
$node->stop('immediate');
$node->start;
check('after an immediate shutdown');

# more than the limit logged: the next VACUUM compacts the pages and empties the log
round('id % 10 IN (1, 7)', 7001, 600);
check('after a third logging VACUUM');
my $items_full = items();
cmp_ok($items_full, '>', sql($live), 'dead items stay on the pages while the log has room');
sql(q(DELETE FROM s WHERE id % 10 = 9; VACUUM (INDEX_CLEANUP ON) s;));
is(items(), sql($live), 'the VACUUM that finds the log full leaves only live items');
check('after the compacting VACUUM');
round('id % 10 = 0', 8001, 300);
check('logging again after the log was emptied');
$node->restart;
check('after a restart once the log was emptied and filled again');

# vacuum_log_limit = 0: every VACUUM changes the pages
sql(q(ALTER INDEX s_v SET (vacuum_log_limit = 0)));
round('id % 10 = 2', 9001, 300);
sql(q(VACUUM (INDEX_CLEANUP ON) s));
is(items(), sql($live), 'vacuum_log_limit 0: only live items after each VACUUM');
check('with vacuum_log_limit 0');

# bad settings are refused
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER INDEX s_v SET (vacuum_log_limit = 101)');
like($err, qr/value 101 out of bounds for option "vacuum_log_limit"/, 'vacuum_log_limit above 100 is refused');

$node->stop;
done_testing();
