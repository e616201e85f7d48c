/*
 * gi_records.c
 *		A buffer of records (key, list, payload) bound for a store, and
 *		sending it as one INSERT or LOAD_CHUNK request in the layout of
 *		gi_records_* (gi_protocol.h).
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "gi_access.h"

/*
 * An empty buffer in cxt, room for `initial` records at first (grown on
 * demand up to the limit of one request).
 */
void
gi_records_init(GiRecordBuf *rb, MemoryContext cxt, uint32 record_bytes,
				uint32 initial)
{
	Size		per = sizeof(uint64) + sizeof(uint32) + record_bytes;

	rb->record_bytes = record_bytes;
	rb->n = 0;
	rb->limit = (uint32) Max(1, GI_CHUNK_BYTES / per);
	rb->cap = Max(1, Min(initial, rb->limit));
	rb->keys = MemoryContextAlloc(cxt, sizeof(uint64) * rb->cap);
	rb->lists = MemoryContextAlloc(cxt, sizeof(uint32) * rb->cap);
	rb->payloads = MemoryContextAllocHuge(cxt, Max((Size) rb->cap * record_bytes, 1));
}

/* room for n more records, beyond the limit of one request if need be */
void
gi_records_reserve(GiRecordBuf *rb, uint32 n)
{
	uint64		need = (uint64) rb->n + n;

	if (need <= rb->cap)
		return;
	if (need > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many gpuindex records for one request")));
	rb->cap = (uint32) Max(need, Min((uint64) rb->cap * 2, (uint64) rb->limit));
	rb->keys = repalloc_huge(rb->keys, sizeof(uint64) * rb->cap);
	rb->lists = repalloc_huge(rb->lists, sizeof(uint32) * rb->cap);
	rb->payloads = repalloc_huge(rb->payloads,
								 Max((Size) rb->cap * rb->record_bytes, 1));
}

/* add one record; true when the buffer holds a request's worth: send it */
bool
gi_records_add(GiRecordBuf *rb, uint64 key, uint32 list, const void *payload)
{
	gi_records_reserve(rb, 1);
	rb->keys[rb->n] = key;
	rb->lists[rb->n] = list;
	memcpy(rb->payloads + (Size) rb->n * rb->record_bytes, payload, rb->record_bytes);
	rb->n++;
	return rb->n >= rb->limit;
}

/* the call that sends the records held; returns its payload, a new buffer */
static char *
records_call(const GiRecordBuf *rb, GiCall *call, GiStoreKey key,
			 Oid relfilenode, GiReqType type, uint64 load_token)
{
	uint32		n = rb->n;
	Size		size = gi_records_size(n, rb->record_bytes);
	char	   *buf = palloc_extended(size, MCXT_ALLOC_HUGE);

	memcpy(gi_records_keys(buf), rb->keys, n * sizeof(uint64));
	memcpy(gi_records_lists(buf, n), rb->lists, n * sizeof(uint32));
	memcpy(gi_records_payloads(buf, n), rb->payloads, (Size) n * rb->record_bytes);

	memset(call, 0, sizeof(*call));
	call->type = type;
	call->key = key;
	call->args.relfilenode = relfilenode;
	call->args.n = n;
	call->args.load_token = load_token;
	call->in = buf;
	call->in_size = size;
	return buf;
}

/*
 * Send the records held (INSERT, or LOAD_CHUNK with the load's token) and
 * empty the buffer; the reply says what became of them.
 */
GiReply
gi_records_send(GiRecordBuf *rb, GiStoreKey key, Oid relfilenode,
				GiReqType type, uint64 load_token)
{
	GiCall		call;
	char	   *buf;

	if (rb->n == 0)
		return GI_REPLY_OK;
	buf = records_call(rb, &call, key, relfilenode, type, load_token);
	gi_call(&call);
	pfree(buf);
	rb->n = 0;
	if (call.reply == GI_REPLY_OVER_BUDGET)
		gi_load_note_over_budget(&call.rargs);
	return call.reply;
}

/*
 * Send the records held as an INSERT nobody waits for (at commit), or, when
 * they do not fit a slot, as one that is waited for; empty the buffer.
 */
void
gi_records_send_detached(GiRecordBuf *rb, GiStoreKey key, Oid relfilenode)
{
	GiCall		call;
	char	   *buf;

	if (rb->n == 0)
		return;
	buf = records_call(rb, &call, key, relfilenode, GI_REQ_INSERT, 0);
	if (!gi_call_detached(&call))
		gi_call(&call);
	pfree(buf);
	rb->n = 0;
}

void
gi_records_free(GiRecordBuf *rb)
{
	pfree(rb->keys);
	pfree(rb->lists);
	pfree(rb->payloads);
	rb->keys = NULL;
	rb->lists = NULL;
	rb->payloads = NULL;
	rb->n = rb->cap = 0;
}
