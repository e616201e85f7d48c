/*
 * gi_sql.c
 *		SQL functions that talk to the device service: ping, service info,
 *		per-store and per-shard statistics.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "gi_client.h"
#include "gi_shmem.h"

PG_FUNCTION_INFO_V1(gpuindex_ping);
PG_FUNCTION_INFO_V1(gpuindex_ping_bench);
PG_FUNCTION_INFO_V1(gpuindex_service);
PG_FUNCTION_INFO_V1(gpuindex_store_stats);
PG_FUNCTION_INFO_V1(gpuindex_store_shards);

/* one empty round trip through the service */
Datum
gpuindex_ping(PG_FUNCTION_ARGS)
{
	(void) gi_call_simple(GI_REQ_PING, NULL, NULL, NULL);
	PG_RETURN_VOID();
}

/*
 * Mean microseconds of n empty round trips, timed inside the backend, so
 * that the figure is the IPC cost alone, without SQL overhead.  With a gap
 * between round trips (long enough for both sides to stop polling and
 * sleep), the figure includes the two latch wake-ups that a lone query
 * pays; without one it is the cost under steady load.
 */
Datum
gpuindex_ping_bench(PG_FUNCTION_ARGS)
{
	int32		n = PG_GETARG_INT32(0);
	int32		gap_us = PG_GETARG_INT32(1);
	instr_time	start,
				elapsed,
				total;

	if (n < 1 || n > 10000000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of round trips must be between 1 and 10000000")));
	if (gap_us < 0 || gap_us > 1000000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gap must be between 0 and 1000000 microseconds")));
	gi_require_service();
	INSTR_TIME_SET_ZERO(total);
	for (int i = 0; i < n; i++)
	{
		if (gap_us > 0)
			pg_usleep(gap_us);
		INSTR_TIME_SET_CURRENT(start);
		(void) gi_call_simple(GI_REQ_PING, NULL, NULL, NULL);
		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_ACCUM_DIFF(total, elapsed, start);
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_FLOAT8(INSTR_TIME_GET_DOUBLE(total) * 1e6 / n);
}

Datum
gpuindex_service(PG_FUNCTION_ARGS)
{
	GiCall		call;
	GiServiceInfo *info;
	TupleDesc	tupdesc;
	Datum		values[14];
	bool		nulls[14] = {0};
	TimestampTz started;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_SERVICE_INFO;
	call.out_capacity = sizeof(GiServiceInfo);
	gi_call(&call);
	info = (GiServiceInfo *) call.out;

	SpinLockAcquire(&gi_shared->mutex);
	started = gi_shared->service_started;
	SpinLockRelease(&gi_shared->mutex);

	values[0] = Int32GetDatum(info->pid);
	values[1] = Int64GetDatum((int64) info->generation);
	values[2] = TimestampTzGetDatum(started);
	values[3] = CStringGetTextDatum(info->backend);
	values[4] = CStringGetTextDatum(info->device_name);
	values[5] = Int64GetDatum((int64) info->requests);
	values[6] = Int64GetDatum((int64) info->rounds);
	values[7] = Float8GetDatum(info->rounds ? (double) info->requests / info->rounds : 0.0);
	values[8] = Int64GetDatum((int64) info->stores);
	values[9] = Int64GetDatum((int64) info->bytes);
	values[10] = Int32GetDatum((int32) info->devices);
	/* this session's own wait is over */
	values[11] = Int32GetDatum((int32) pg_atomic_read_u32(&gi_shared->waiting));
	values[12] = Float8GetDatum(info->round_ns / 1e9);
	values[13] = Float8GetDatum(info->search_ns / 1e9);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* the service's statistics rows (GI_STATS_SHARDS in flags: per shard) */
static GiStoreStatRow *
fetch_stats(uint32 flags, uint64 *count)
{
	GiCall		call;

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_STATS;
	call.args.flags = flags;
	call.out_capacity = 64 * sizeof(GiStoreStatRow);
	gi_call(&call);
	*count = call.rargs.count;
	return (GiStoreStatRow *) call.out;
}

/* the row's database, index and index name (this database's only) */
static int
stat_names(const GiStoreStatRow *r, Datum *values, bool *nulls)
{
	char	   *relname = NULL;
	int			c = 0;

	if (r->key.dbid == MyDatabaseId)
		relname = get_rel_name(r->key.relid);
	values[c++] = ObjectIdGetDatum(r->key.dbid);
	values[c++] = ObjectIdGetDatum(r->key.relid);
	if (relname)
		values[c++] = CStringGetTextDatum(relname);
	else
		nulls[c++] = true;
	return c;
}

Datum
gpuindex_store_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GiStoreStatRow *rows;
	uint64		count;

	InitMaterializedSRF(fcinfo, 0);
	rows = fetch_stats(0, &count);
	for (uint64 i = 0; i < count; i++)
	{
		GiStoreStatRow *r = &rows[i];
		Datum		values[22];
		bool		nulls[22] = {0};
		int			c = stat_names(r, values, nulls);

		values[c++] = ObjectIdGetDatum(r->relfilenode);
		values[c++] = CStringGetTextDatum(r->kind);
		values[c++] = CStringGetTextDatum(r->backend);
		/* a session's store of a part of the index (a search in parts) */
		if (r->key.part != 0)
			values[c++] = CStringGetTextDatum(r->ready ? "part" : "loading part");
		else
			values[c++] = CStringGetTextDatum(r->ready ? "ready" : "loading");
		if (r->dim > 0)
			values[c++] = Int32GetDatum((int32) r->dim);
		else
			nulls[c++] = true;
		if (r->metric[0] != '\0')
			values[c++] = CStringGetTextDatum(r->metric);
		else
			nulls[c++] = true;
		values[c++] = Int64GetDatum((int64) r->st.lists);
		values[c++] = Int64GetDatum((int64) r->st.rows);
		values[c++] = Int64GetDatum((int64) r->st.slabs_used);
		values[c++] = Int64GetDatum((int64) r->st.slabs_free);
		values[c++] = Int64GetDatum((int64) r->st.bytes);
		values[c++] = Int64GetDatum((int64) r->st.payload_bytes);
		values[c++] = Int64GetDatum((int64) r->st.inserts);
		values[c++] = Int64GetDatum((int64) r->st.deletes);
		values[c++] = Int64GetDatum((int64) r->searches);
		values[c++] = Int64GetDatum((int64) r->search_batches);
		values[c++] = Float8GetDatum(r->search_batches ? (double) r->searches / r->search_batches : 0.0);
		values[c++] = Int64GetDatum((int64) r->loads);
		values[c++] = Int32GetDatum(r->device);
		Assert(c == lengthof(values));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* a row per shard of each store: where its records are */
Datum
gpuindex_store_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GiStoreStatRow *rows;
	uint64		count;

	InitMaterializedSRF(fcinfo, 0);
	rows = fetch_stats(GI_STATS_SHARDS, &count);
	for (uint64 i = 0; i < count; i++)
	{
		GiStoreStatRow *r = &rows[i];
		Datum		values[15];
		bool		nulls[15] = {0};
		int			c = stat_names(r, values, nulls);

		values[c++] = Int32GetDatum(r->shard);
		values[c++] = Int32GetDatum((int32) r->shards);
		values[c++] = Int32GetDatum(r->service_device);
		values[c++] = Int32GetDatum(r->device);
		values[c++] = Int64GetDatum((int64) r->st.lists);
		values[c++] = Int64GetDatum((int64) r->st.rows);
		values[c++] = Int64GetDatum((int64) r->st.keys);
		values[c++] = Int64GetDatum((int64) r->st.slabs_used);
		values[c++] = Int64GetDatum((int64) r->st.bytes);
		values[c++] = Int64GetDatum((int64) r->st.payload_bytes);
		values[c++] = Int64GetDatum((int64) r->st.inserts);
		values[c++] = Int64GetDatum((int64) r->st.deletes);
		Assert(c == lengthof(values));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
