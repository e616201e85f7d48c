# Inserts sent to the device service at commit without waiting for it.
# A row committed by one session must be found by the index in any search
# that begins after the commit, in any other session: clients that insert
# and clients that look up the newest committed row by the index run side by
# side (pgbench), and every look-up must find that row.  An insert the
# service cannot apply must lose nothing: with gpuindex.memory_limit just
# above what the stores hold, single-row INSERTs past the limit all commit,
# the server log says the store was dropped, and the index then answers as a
# sequential scan does (searched in parts).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GpuindexTest;

my $node = GpuindexTest::new_node('commit_inserts');
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

# vec(i, d): d numbers from i's hash, one vector per id
sql(q{
CREATE EXTENSION gpuindex;
CREATE FUNCTION vec(i bigint, d int) RETURNS real[] LANGUAGE sql IMMUTABLE AS
  $$ SELECT ARRAY(SELECT ((hashint8(i * 1000 + j) & 65535) / 655.36)::real
                  FROM generate_series(1, d) j) $$;
CREATE TABLE t (id bigint PRIMARY KEY, v real[]);
INSERT INTO t SELECT i, vec(i, 16) FROM generate_series(1, 3000) i;
CREATE INDEX t_v ON t USING gpuivf (v real_l2_ops) WITH (lists = 8);
CREATE SEQUENCE ids START 1000000;
CREATE SEQUENCE looks;
CREATE TABLE missed (id bigint);
ALTER DATABASE postgres SET gpuivf.probes = 10000;
ALTER DATABASE postgres SET enable_seqscan = off;
ALTER DATABASE postgres SET enable_sort = off;
});

my $lookup = q{INSERT INTO missed
SELECT p.id FROM (SELECT id, v FROM t ORDER BY id DESC LIMIT 1) p
WHERE nextval('looks') > 0
  AND (SELECT t2.id FROM t t2 ORDER BY t2.v <-> p.v LIMIT 1) IS DISTINCT FROM p.id;};
like(sql("EXPLAIN (COSTS OFF) $lookup"), qr/Index Scan using t_v/,
	'the look-up searches the gpuivf index');

my $dir = $node->basedir;
open(my $fh, '>', "$dir/insert.sql") or die;
print $fh "INSERT INTO t SELECT n, vec(n, 16) FROM nextval('ids') n;\n";
close $fh;
open($fh, '>', "$dir/lookup.sql") or die;
print $fh "$lookup\n";
close $fh;

$node->command_ok(
	[
		'pgbench', '-n', '-c', '8', '-j', '4', '-T', '6',
		'-f', "$dir/insert.sql\@3", '-f', "$dir/lookup.sql\@2", 'postgres'
	],
	'eight clients insert and look up side by side');
my $inserted = sql(q{SELECT count(*) FROM t WHERE id >= 1000000});
my $looks = sql(q{SELECT last_value FROM looks});
note("rows inserted: $inserted, look-ups: $looks");
cmp_ok($inserted, '>', 100, 'rows were inserted');
cmp_ok($looks, '>', 100, 'look-ups ran');
is(sql(q{SELECT count(*) FROM missed}), '0',
	'every look-up found the newest committed row through the index');

# an insert the service cannot apply: the store is dropped, nothing is lost.
# One store only, and twice its rows inserted past a limit 1 MB above what it
# holds, so that no slack a store keeps for growth can take them all.
sql(q{
DROP TABLE t;
CREATE TABLE big (id bigint, v real[]);
INSERT INTO big SELECT i, vec(i, 256) FROM generate_series(1, 3000) i;
CREATE INDEX big_v ON big USING gpuivf (v real_l2_ops) WITH (lists = 4);
SELECT id FROM big ORDER BY v <-> vec(1, 256) LIMIT 1;
});
my $held = sql(q{SELECT sum(bytes) FROM gpuindex_stats});
my $limit_mb = int($held / (1024 * 1024)) + 1;
note("stores hold $held bytes; memory_limit = $limit_mb MB");
sql("ALTER SYSTEM SET gpuindex.memory_limit = '${limit_mb}MB'; SELECT pg_reload_conf();");
$node->poll_query_until('postgres', "SELECT current_setting('gpuindex.memory_limit') = '${limit_mb}MB'")
  or die 'the new memory_limit did not arrive';
# the service takes the setting at its next round: a request, then a moment
sql(q{SELECT count(*) FROM gpuindex_stats});
sleep(1);

my $log_offset = -s $node->logfile;
open($fh, '>', "$dir/insert_big.sql") or die;
print $fh "INSERT INTO big SELECT n, vec(n, 256) FROM nextval('ids') n;\n";
close $fh;
$node->command_ok([ 'pgbench', '-n', '-c', '1', '-t', '6000', '-f', "$dir/insert_big.sql", 'postgres' ],
	'6,000 single-row INSERTs past the memory limit all commit');
is(sql(q{SELECT count(*) FROM big}), '9000', 'every row is in the table');
ok($node->log_contains(qr/an insert into index \d+ sent at commit failed/, $log_offset),
	'the server log says an insert sent at commit failed and its store was dropped');

# exact answers: all lists probed, the index against a sequential scan
my $q = q{SELECT string_agg(ids, ' ' ORDER BY q) FROM (
  SELECT q, (SELECT string_agg(id::text, ',') FROM
               (SELECT id FROM big ORDER BY v <-> vec(q, 256)%s LIMIT 10) s) AS ids
  FROM generate_series(1000000, 1005000, 250) q) x;};
my $by_index = sql(sprintf($q, ''));
my $by_scan = $node->safe_psql('postgres',
	'SET enable_seqscan = on; SET enable_sort = on; SET enable_indexscan = off; '
	  . sprintf($q, ', ctid'));
is($by_index, $by_scan, 'after the dropped store the index answers as a sequential scan');
like(sql(q{EXPLAIN (COSTS OFF) SELECT id FROM big ORDER BY v <-> vec(1, 256) LIMIT 10}),
	qr/Index Scan using big_v/, 'those answers came through the index');

done_testing();
