# SERIALIZABLE: two transactions that each search near one vector and then
# insert beside it form a write skew; with the ordered index scan or with
# the batch search, one of them must fail with a serialization error, as it
# would without the index.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('serializable');
$node->start;
GpuindexTest::create_table($node, 2000, 10);

my %search = (
	'ordered scan' => q(SET enable_seqscan = off; SET gpuivf.probes = 10;
		SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 5) s;),
	'batch search' => q(SET gpuivf.probes = 10;
		SELECT count(*) FROM gpuivf_search('t_v_idx', (SELECT array_agg(x) FROM unnest((SELECT v FROM qs WHERE q = 1)) x), 5);));

my $next_id = 100000;
for my $how (sort keys %search)
{
	my $s1 = $node->background_psql('postgres', on_error_stop => 0);
	my $s2 = $node->background_psql('postgres', on_error_stop => 0);
	for my $s ($s1, $s2)
	{
		$s->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
		$s->query_safe($search{$how});
	}
	my @errs;
	for my $s ($s1, $s2)
	{
		my $id = $next_id++;
		$s->query(qq(INSERT INTO t SELECT $id, v FROM qs WHERE q = 1));
		push @errs, $s->{stderr};
		$s->{stderr} = '';
		$s->query('COMMIT');
		push @errs, $s->{stderr};
		$s->{stderr} = '';
	}
	$_->quit for ($s1, $s2);
	my $failures = grep { /could not serialize access/ } @errs;
	is($failures, 1, "$how: one of two write-skewed transactions fails to serialize");
}

$node->stop;
done_testing();
