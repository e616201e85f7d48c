# gpusparse after crashes: an immediate shutdown after inserts, deletes and
# a VACUUM (its pages logged whole after a checkpoint), and a backend killed
# with SIGKILL while inserting; after each, the store (reloaded from the
# WAL-replayed pages) answers exactly what a sequential scan answers, for
# top-k and for the whole table in order.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('sparse');
$node->start;
GpuindexTest::create_sparse_table($node, 3000, 0.7);

sub answers
{
	my ($use_index) = @_;
	return GpuindexTest::sparse_answers($node, $use_index);
}

is(answers(1), answers(0), 'index answers equal a sequential scan');

$node->safe_psql('postgres', q(
INSERT INTO s SELECT i, rnd() FROM generate_series(3001, 4000) i;
DELETE FROM s WHERE id % 4 = 0;
CHECKPOINT;
VACUUM (INDEX_CLEANUP ON) s;
INSERT INTO s SELECT i, rnd() FROM generate_series(4001, 4500) i;
DELETE FROM s WHERE id % 9 = 0;
));
is(answers(1), answers(0), 'after inserts, deletes and VACUUM');

$node->stop('immediate');
$node->start;
is(answers(1), answers(0), 'after an immediate shutdown the reloaded store answers as before');

# a backend killed while inserting: the postmaster resets every process
GpuindexTest::kill_backend_during($node,
	q(DO $$ BEGIN FOR i IN 5000 .. 1000000 LOOP INSERT INTO s SELECT i, rnd(); COMMIT; END LOOP; END $$),
	'SELECT count(*) > 4100 FROM s');
is(answers(1), answers(0), 'after a backend crash');

$node->stop;
done_testing();
