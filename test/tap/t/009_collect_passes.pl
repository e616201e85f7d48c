# An insert sent at commit and queued behind one of the service's passes
# over its slots (in a slot that pass had already looked at) must reach the
# index before a search that another session starts after that commit and
# that the same pass then takes.  gpuindex.debug_collect_pause_pid makes the
# service pause once, for a second, right after a later pass looked at the
# inserting session's slot; meanwhile that session inserts and commits and
# another session searches for the new row.  Sessions take slots by their
# process number, which the test cannot choose, so it runs both ways round:
# in one of them the searcher's slot comes after the inserter's, which is
# the case that needs the service to pass over the slots once more.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('collect_passes');
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION gpuindex;
CREATE FUNCTION vec(i bigint) RETURNS real[] LANGUAGE sql IMMUTABLE AS
  $$ SELECT ARRAY(SELECT ((hashint8(i * 1000 + j) & 65535) / 655.36)::real
                  FROM generate_series(1, 16) j) $$;
CREATE TABLE t (id bigint PRIMARY KEY, v real[]);
INSERT INTO t SELECT i, vec(i) FROM generate_series(1, 2000) i;
CREATE INDEX t_v ON t USING gpuivf (v real_l2_ops) WITH (lists = 4);
ALTER DATABASE postgres SET gpuivf.probes = 4;
ALTER DATABASE postgres SET enable_seqscan = off;
});

# a session that has used the service, so that its slot carries its pid
sub session
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('SELECT id FROM t ORDER BY v <-> vec(1) LIMIT 1');
	return $s;
}

my $trigger = session();
my %s = (x => session(), y => session());
my %pid = map { $_ => $s{$_}->query_safe('SELECT pg_backend_pid()') } keys %s;
my $id = 1000000;

for my $order ([ 'x', 'y' ], [ 'y', 'x' ])
{
	my ($ins, $look) = @$order;
	my $offset = -s $node->logfile;

	$id++;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET gpuindex.debug_collect_pause_pid = $pid{$ins}; SELECT pg_reload_conf();");
	$node->poll_query_until('postgres',
		"SELECT setting = '$pid{$ins}' FROM pg_settings WHERE name = 'gpuindex.debug_collect_pause_pid'");
	sleep(1);    # the service reloads at the top of its next loop

	# a search for the service's first pass; its later pass pauses after $ins's slot
	$trigger->query_until(qr/go/, "\\echo go\nSELECT id FROM t ORDER BY v <-> vec(2) LIMIT 1;\n");
	ok( $node->wait_for_log(qr/pausing \d+ ms after the slot of process $pid{$ins}/, $offset),
		"the service paused after the inserting session's slot ($ins inserts, $look searches)");
	# during the pause: a commit, then a search that begins after it
	$s{$ins}->query_safe("INSERT INTO t VALUES ($id, vec($id))");
	is($s{$look}->query_safe("SELECT id FROM t ORDER BY v <-> vec($id) LIMIT 1"),
		$id, "the search begun after the commit finds the row ($ins inserts, $look searches)");
	like($trigger->query_safe('SELECT 1'), qr/^1$/m, 'the first search was answered');
}

$node->safe_psql('postgres',
	'ALTER SYSTEM RESET gpuindex.debug_collect_pause_pid; SELECT pg_reload_conf();');
$_->quit for ($trigger, values %s);
$node->stop;
done_testing();
