/*
 * gi_debug.c
 *		Test hooks of the device service: a request left behind with a
 *		vanished payload, raw requests as an access method sends them, and
 *		injected faults.
 *
 * Not part of the extension's SQL API: a test that needs one creates it
 * itself (CREATE FUNCTION ... AS 'gpuindex', '<name>' LANGUAGE C, see
 * test/service.sh), and each refuses to run for anyone but a superuser.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "gi_client.h"

static void
require_superuser(void)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only superusers may use gpuindex test hooks")));
}

PG_FUNCTION_INFO_V1(gpuindex_debug_vanished_request);

/*
 * Queue a PING whose payload segment has vanished and return at once:
 * the state a backend leaves when it exits between queueing a request
 * and the service taking it.  The service must still finish the slot, so
 * that this session's next request (the next process given the slot)
 * goes through.
 */
Datum
gpuindex_debug_vanished_request(PG_FUNCTION_ARGS)
{
	GiCall		call;

	require_superuser();
	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_PING;
	gi_queue_vanished(&call);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(gpuindex_debug_fault);

/*
 * Inject a fault into the service: 'device' (a device error: the request
 * gets an ERROR, the service restarts) or 'signal' (a crash inside the
 * service, as a fault in CUDA code would be; queued without waiting),
 * 'thread' (an invalid write on a helper thread of the host backend's
 * pool; queued without waiting) or 'cuda' (a real illegal write by a CUDA
 * kernel: the request gets the backend's ERROR, the service restarts;
 * needs the CUDA backend).  Either way only the service restarts, never
 * the cluster.  'stall' keeps the service busy for GI_FAULT_STALL_MS
 * before it answers, so that other sessions' requests wait.
 */
Datum
gpuindex_debug_fault(PG_FUNCTION_ARGS)
{
	char	   *kind = text_to_cstring(PG_GETARG_TEXT_PP(0));
	GiCall		call;

	require_superuser();
	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_DEBUG_FAULT;
	if (strcmp(kind, "device") == 0)
	{
		call.args.n = GI_FAULT_DEVICE;
		gi_call(&call);
	}
	else if (strcmp(kind, "signal") == 0)
	{
		call.args.n = GI_FAULT_SIGNAL;
		gi_queue_nowait(&call);
	}
	else if (strcmp(kind, "cuda") == 0)
	{
		call.args.n = GI_FAULT_CUDA;
		gi_call(&call);
	}
	else if (strcmp(kind, "thread") == 0)
	{
		call.args.n = GI_FAULT_THREAD;
		gi_queue_nowait(&call);
	}
	else if (strcmp(kind, "stall") == 0)
	{
		call.args.n = GI_FAULT_STALL;
		gi_call(&call);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown fault \"%s\"", kind),
				 errhint("Use \"device\", \"signal\", \"thread\", \"cuda\" or \"stall\".")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(gpuindex_debug_request);

static const char *const gi_reply_names[] = {
	[GI_REPLY_OK] = "ok",
	[GI_REPLY_NOT_LOADED] = "not_loaded",
	[GI_REPLY_BUSY] = "busy",
	[GI_REPLY_ALREADY_LOADED] = "already_loaded",
	[GI_REPLY_TOO_SMALL] = "too_small",
	[GI_REPLY_RESTARTED] = "restarted",
	[GI_REPLY_ERROR] = "error",
	[GI_REPLY_UNSUPPORTED] = "unsupported",
	[GI_REPLY_NO_JOB] = "no_job",
};

/*
 * Send one raw request, as an access method would, and return the reply:
 * (reply, count, token, answer).  Arguments: type (GiReqType), index OID
 * (the store key, with this database), relfilenode, kind, n, k,
 * load_token, kargs (at most GI_KARGS_BYTES) and payload, the last two in
 * the layouts of gi_protocol.h and the kind's header, little-endian.
 * Error replies raise the error, as for any caller.
 */
Datum
gpuindex_debug_request(PG_FUNCTION_ARGS)
{
	bytea	   *kargs = PG_GETARG_BYTEA_PP(7);
	bytea	   *payload = PG_GETARG_BYTEA_PP(8);
	GiCall		call;
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {0};
	bytea	   *answer;

	require_superuser();
	if (VARSIZE_ANY_EXHDR(kargs) > GI_KARGS_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kargs of %zu bytes, at most %d allowed",
						(size_t) VARSIZE_ANY_EXHDR(kargs), GI_KARGS_BYTES)));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&call, 0, sizeof(call));
	call.type = (GiReqType) PG_GETARG_INT32(0);
	call.key.dbid = MyDatabaseId;
	call.key.relid = PG_GETARG_OID(1);
	call.args.relfilenode = PG_GETARG_OID(2);
	call.args.kind = (uint32) PG_GETARG_INT32(3);
	call.args.n = (uint32) PG_GETARG_INT32(4);
	call.args.k = (uint32) PG_GETARG_INT32(5);
	call.args.load_token = (uint64) PG_GETARG_INT64(6);
	memcpy(call.args.kargs.bytes, VARDATA_ANY(kargs), VARSIZE_ANY_EXHDR(kargs));
	call.in = VARDATA_ANY(payload);
	call.in_size = VARSIZE_ANY_EXHDR(payload);
	if (call.type == GI_REQ_SEARCH)
		call.out_capacity = gi_search_out_size(call.args.n, Max(call.args.k, 1));
	gi_call(&call);

	values[0] = CStringGetTextDatum((int) call.reply >= 0 &&
									(int) call.reply < lengthof(gi_reply_names) ?
									gi_reply_names[call.reply] : "?");
	values[1] = Int64GetDatum((int64) call.rargs.count);
	values[2] = Int64GetDatum((int64) call.rargs.token);
	answer = palloc(VARHDRSZ + call.rargs.out_size);
	SET_VARSIZE(answer, VARHDRSZ + call.rargs.out_size);
	if (call.out)
		memcpy(VARDATA(answer), call.out, call.rargs.out_size);
	values[3] = PointerGetDatum(answer);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
