# Faults inside the device service restart the service alone: a device error,
# a crash by signal on the service's thread and one on a helper thread (and, on
# the CUDA backend, a real fault inside a kernel) each end the service, which
# the postmaster starts again; the cluster is never reset, a session connected
# throughout keeps its connection, and the index then answers as a sequential
# scan does.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('fault');
$node->append_conf('postgresql.conf', "gpuindex.host_threads = 2\n");
$node->start;
GpuindexTest::create_table($node, 2000, 10);
$node->safe_psql('postgres', q(
CREATE FUNCTION gpuindex_debug_fault(text) RETURNS void
  AS 'gpuindex', 'gpuindex_debug_fault' LANGUAGE C STRICT;
));
my $reference = GpuindexTest::answers($node, 0);
is(GpuindexTest::answers($node, 1), $reference, 'index answers equal a sequential scan');

my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $pid = $node->safe_psql('postgres', 'SELECT pid FROM gpuindex_service()');

# a session connected throughout: a cluster reset would cut it
my ($long_out, $long_err) = ('', '');
my $long = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'),
	  '-c', 'SELECT pg_sleep(10)', '-c', "SELECT 'still connected'" ],
	'>', \$long_out, '2>', \$long_err);

my @faults = ('device', 'signal', 'thread');
push @faults, 'cuda' if ($ENV{GPUINDEX_TEST_DEVICE} // 'cpu') eq 'cuda';
for my $fault (@faults)
{
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT gpuindex_debug_fault('$fault')");
	if ($fault eq 'device')
	{
		like($err, qr/injected device fault/, 'a device fault answers its request with an ERROR');
	}
	elsif ($fault eq 'cuda')
	{
		like($err, qr/illegal memory access/, "a CUDA fault answers its request with the backend's ERROR");
	}
	ok( $node->poll_query_until('postgres',
			"SELECT pid NOT IN (0, $pid) FROM gpuindex_service()"),
		"a new service runs after the $fault fault");
	$pid = $node->safe_psql('postgres', 'SELECT pid FROM gpuindex_service()');
	is(GpuindexTest::answers($node, 1), $reference,
		"after the $fault fault the index answers as a sequential scan");
}

$long->finish;
like($long_out, qr/still connected/, 'a session connected throughout kept its connection');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$started, 'the postmaster never reset the cluster');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminating any other active server processes/,
	'no cluster-wide reset in the server log');
my $restarts = () = $log =~ /restarting the service/g;
is($restarts, scalar(@faults), 'the server log says why the service restarted, once a fault');

$node->stop;
done_testing();
