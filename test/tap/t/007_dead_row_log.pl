# gpusparse's dead-row log: while it has room, VACUUM records the dead rows'
# TIDs in the log and changes no page holding their items; the heap then
# reuses those TIDs for new rows.  The new rows must be alive and the logged
# ones dead for the running store, for ordered scans that read the pages
# (the whole table in order), after a restart and after a crash (the store
# reloaded from the pages and the log), and after the VACUUM that finds the
# log full, removes the logged items from the pages and empties the log.
# The TID directory, which VACUUM reads instead of the rows, must hold
# exactly the live rows after every VACUUM.  vacuum_log_limit = 0 changes
# the pages at every VACUUM.  The reference is a sequential scan; page LSNs,
# chains and item counts come from pageinspect.
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

# the blocks of the chain whose head is the metapage's item $off (2: the
# rows, 3: the dead-row log, 4: the TID directory), read with pageinspect
sub chain_blocks
{
	my ($off) = @_;
	return sql(qq(WITH RECURSIVE chain(b) AS (
  SELECT get_byte(h, 0) + get_byte(h, 1) * 256 + get_byte(h, 2) * 65536 + get_byte(h, 3)::bigint * 16777216
    FROM (SELECT substring(get_raw_page('s_v', 0) FROM lp_off + 1 FOR 4) h
            FROM heap_page_items(get_raw_page('s_v', 0)) WHERE lp = $off) m
  UNION ALL
  SELECT get_byte(p, s) + get_byte(p, s + 1) * 256 + get_byte(p, s + 2) * 65536 + get_byte(p, s + 3)::bigint * 16777216
    FROM chain c, LATERAL (SELECT get_raw_page('s_v', c.b::int) p) r,
         LATERAL (SELECT (page_header(r.p)).special s) q
   WHERE c.b <> 4294967295)
SELECT coalesce(string_agg(b::text, ' '), '') FROM chain WHERE b <> 4294967295));
}

# the items on a chain's pages
sub chain_items
{
	my @blocks = split / /, chain_blocks($_[0]);
	return 0 unless @blocks;
	return sql(qq(SELECT sum(greatest((page_header(get_raw_page('s_v', b))).lower - 24, 0) / 4)
	  FROM unnest('{@{[ join(',', @blocks) ]}}'::int[]) b));
}

# every page's LSN
sub lsns
{
	return sql(q(SELECT string_agg(b || ':' || (page_header(get_raw_page('s_v', b))).lsn, ' ' ORDER BY b)
	  FROM generate_series(0, pg_relation_size('s_v') / 8192 - 1) b));
}

sub items { return chain_items(2); }
sub directory { return chain_items(4); }

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
is(directory(), sql($live), 'the TID directory holds every row after the build');
is(chain_items(3), 0, 'the log is empty after the build');

# a VACUUM with room in its log changes no page of the rows (the TID
# directory loses the dead rows' entries, the log gains them)
my @rowpages = split / /, chain_blocks(2);
my %before = map { split /:/ } split / /, lsns();
sql(q(INSERT INTO gone SELECT ctid FROM s WHERE id % 10 = 3;
DELETE FROM s WHERE id % 10 = 3;
VACUUM (INDEX_CLEANUP ON) s;));
my %after = map { split /:/ } split / /, lsns();
my @changed = grep { $after{$_} ne $before{$_} } @rowpages;
cmp_ok(scalar(@rowpages), '>', 10, 'the rows fill several pages');
is(scalar(@changed), 0, 'a VACUUM with room in its log changes no page of the rows')
  or diag("changed: @changed");
is(items(), $items0, 'the dead rows keep their items');
is(chain_items(3), 1, 'the log holds one item (the VACUUM\'s dead TIDs)');
is(directory(), sql($live), 'the TID directory holds exactly the live rows');

sql(q(INSERT INTO s SELECT i, rnd() FROM generate_series(5001, 5300) i));
my $reused = sql(q(SELECT count(*) FROM s WHERE ctid IN (SELECT t FROM gone)));
cmp_ok($reused, '>', 100, 'the heap reused logged TIDs for new rows');
check('after a logging VACUUM and inserts at reused TIDs');

$node->restart;
check('after a restart (store reloaded from the pages and the log)');

# a second logging round, then a crash
round('id % 10 = 5', 6001, 300);
check('after a second logging VACUUM');
is(directory(), sql($live), 'the TID directory holds the live rows after a second VACUUM and inserts');
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
is(chain_items(3), 0, 'and empties the log');
is(directory(), sql($live), 'the TID directory holds the live rows after the compacting VACUUM');
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
is(directory(), sql($live), 'vacuum_log_limit 0: the TID directory holds the live rows');
check('with vacuum_log_limit 0');

# bad settings are refused
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER INDEX s_v SET (vacuum_log_limit = 101)');
like($err, qr/value 101 out of bounds for option "vacuum_log_limit"/, 'vacuum_log_limit above 100 is refused');

$node->stop;
done_testing();
