/*
 * gi_client.c
 *		Backend side of the device service protocol.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "gi_client.h"
#include "gi_shmem.h"

/* how long a request may wait for a service that is not running at all */
#define GI_NO_SERVICE_TIMEOUT_MS	30000

void
gi_require_service(void)
{
	if (gi_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gpuindex is not loaded through shared_preload_libraries"),
				 errdetail("gpuindex indexes live in the gpuindex device service, a background worker started only when the library is preloaded."),
				 errhint("Add gpuindex to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static GiSlot *
my_slot(void)
{
	Assert(MyProc != NULL);
	return &gi_shared->slots[MyProc->pgprocno];
}

/*
 * Wait until an earlier, abandoned request of ours is out of the service's
 * hands.  Usually the slot is idle already.
 */
/* whether the slot is idle now (an answer nobody will read released) */
static bool
slot_settled(GiSlot *slot)
{
	GiSlotState st;

	SpinLockAcquire(&slot->mutex);
	st = slot->state;
	if (st == GI_SLOT_DONE)
		slot->state = st = GI_SLOT_IDLE;
	SpinLockRelease(&slot->mutex);
	return st == GI_SLOT_IDLE;
}

static void
wait_slot_idle(GiSlot *slot)
{
	while (!slot_settled(slot))
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* on error while waiting: hand the request over to the service to drop */
static void
abandon_request(GiSlot *slot)
{
	SpinLockAcquire(&slot->mutex);
	if (slot->state == GI_SLOT_DONE)
		slot->state = GI_SLOT_IDLE;
	else if (slot->state != GI_SLOT_IDLE)
		slot->state = GI_SLOT_ABANDONED;
	SpinLockRelease(&slot->mutex);
}

/*
 * gpuindex.client_spin_us, or by default 100 µs when the service searches on
 * a GPU and none when it searches on the host's cores: a session polling
 * there takes a core from the search it waits for.
 */
static int
client_spin_us(void)
{
	bool		host;

	if (gi_client_spin_us >= 0)
		return gi_client_spin_us;
	SpinLockAcquire(&gi_shared->mutex);
	host = gi_shared->host_searches;
	SpinLockRelease(&gi_shared->mutex);
	return host ? 0 : 100;
}

/*
 * Sessions that may be waiting for answers while one polls: the online CPUs
 * less one (the service's), at least one.  When more wait, the sessions
 * they wait behind need the cores to finish their statements, and a
 * session polling would take one of them, so it sleeps at once instead.
 */
static uint32
max_waiting_to_poll(void)
{
	static uint32 max = 0;

	if (max == 0)
	{
		long		cpus = sysconf(_SC_NPROCESSORS_ONLN);

		max = cpus > 2 ? (uint32) (cpus - 1) : 1;
	}
	return max;
}

static void
wait_loop(GiSlot *slot, TimestampTz spin_until)
{
	TimestampTz	no_service_since = 0;

	for (;;)
	{
		GiSlotState st;
		int			service_pid;

		SpinLockAcquire(&slot->mutex);
		st = slot->state;
		SpinLockRelease(&slot->mutex);
		if (st == GI_SLOT_DONE)
			return;

		/* small requests come back in microseconds: skip the sleep */
		if (spin_until != 0)
		{
			if (GetCurrentTimestamp() < spin_until)
			{
				pg_spin_delay();
				continue;
			}
			spin_until = 0;
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		SpinLockAcquire(&gi_shared->mutex);
		service_pid = gi_shared->service_pid;
		SpinLockRelease(&gi_shared->mutex);
		if (service_pid != 0)
			no_service_since = 0;
		else if (no_service_since == 0)
			no_service_since = GetCurrentTimestamp();
		else if (TimestampDifferenceExceeds(no_service_since, GetCurrentTimestamp(),
											GI_NO_SERVICE_TIMEOUT_MS))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("gpuindex device service is not running"),
					 errdetail("No device service answered for %d seconds.",
							   GI_NO_SERVICE_TIMEOUT_MS / 1000),
					 errhint("Check the server log for why the \"gpuindex device service\" background worker does not start.")));
	}
}

/* until the slot's answer is there: polling first when cores are free, then asleep */
static void
wait_for_answer(GiSlot *slot)
{
	int			spin_us = client_spin_us();
	uint32		waiting = pg_atomic_add_fetch_u32(&gi_shared->waiting, 1);

	PG_TRY();
	{
		wait_loop(slot, spin_us > 0 && waiting <= max_waiting_to_poll() ?
				  GetCurrentTimestamp() + spin_us : 0);
	}
	PG_FINALLY();
	{
		pg_atomic_fetch_sub_u32(&gi_shared->waiting, 1);
	}
	PG_END_TRY();
}

/* fill the idle slot with call (payload already in place) and queue it */
static void
queue_request(GiSlot *slot, const GiCall *call)
{
	slot->type = call->type;
	slot->key = call->key;
	slot->args = call->args;
	slot->in_size = call->in_size;
	slot->latch = MyLatch;
	slot->pid = MyProcPid;
	slot->reply = GI_REPLY_ERROR;
	memset(&slot->rargs, 0, sizeof(slot->rargs));

	SpinLockAcquire(&slot->mutex);
	slot->state = GI_SLOT_QUEUED;
	SpinLockRelease(&slot->mutex);
	gi_wake_service();
}

/* queue call in the idle slot with its payload (if any) in the slot's buffer */
static void
queue_inline(GiSlot *slot, const GiCall *call)
{
	Assert(call->in_size <= GI_SLOT_INLINE && call->out_capacity <= GI_SLOT_INLINE);
	slot->dsm = DSM_HANDLE_INVALID;
	slot->capacity = GI_SLOT_INLINE;
	if (call->in_size > 0)
		memcpy(slot->buf, call->in, call->in_size);
	queue_request(slot, call);
}

GiSearchTimes gi_last_search;
bool		gi_trace_stages = false;

/* the answer in slot (payload in buf) into call; the slot becomes idle */
static void
take_answer(GiSlot *slot, GiCall *call, const char *buf)
{
	call->reply = slot->reply;
	call->rargs = slot->rargs;
	call->out = NULL;
	if (call->reply == GI_REPLY_OK && call->rargs.out_size > 0)
	{
		Assert(call->rargs.out_size <= slot->capacity);
		call->out = palloc(call->rargs.out_size);
		memcpy(call->out, buf, call->rargs.out_size);
	}
	SpinLockAcquire(&slot->mutex);
	slot->state = GI_SLOT_IDLE;
	SpinLockRelease(&slot->mutex);
}

/* a submission in flight: its payload's buffer and segment, its times */
struct GiCallAhead
{
	GiCall	   *call;
	dsm_segment *seg;			/* a segment of this request alone, or NULL */
	char	   *buf;
	uint64		t_submit;
	uint64		t_queued;
};

/*
 * Payloads above the slot's inline buffer and up to GI_KEPT_SEGMENT_MAX go
 * through a segment the session keeps (mapped for its lifetime, grown by
 * powers of two), so that a batch's requests do not each create, fault in
 * and destroy a segment; larger ones take a segment of their own.  Small,
 * as every session may keep one in /dev/shm, which containers often cap.
 */
static dsm_segment *kept_seg = NULL;

/* the session's kept segment, at least `capacity` bytes */
static dsm_segment *
kept_segment(Size capacity)
{
	Size		size = 64 * 1024;

	Assert(capacity <= GI_KEPT_SEGMENT_MAX);
	if (kept_seg != NULL && dsm_segment_map_length(kept_seg) >= capacity)
		return kept_seg;
	while (size < capacity)
		size *= 2;
	if (kept_seg != NULL)
	{
		dsm_detach(kept_seg);
		kept_seg = NULL;
	}
	kept_seg = dsm_create(size, 0);
	dsm_pin_mapping(kept_seg);
	return kept_seg;
}

/* the first half of a submission: payload in place, request queued */
static void
submit_start(GiCall *call, GiCallAhead *h)
{
	GiSlot	   *slot = my_slot();
	Size		capacity = Max(call->in_size, call->out_capacity);

	wait_slot_idle(slot);
	h->call = call;
	h->seg = NULL;
	h->t_submit = gi_now_ns();
	if (call->type == GI_REQ_SEARCH && gi_trace_stages)
		call->args.flags |= GI_REQ_TRACE;

	if (capacity > GI_SLOT_INLINE)
	{
		dsm_segment *seg;

		/*
		 * The slot is idle: the service, which may keep the kept segment
		 * mapped, reads and writes it only while it holds a request.
		 */
		if (capacity <= GI_KEPT_SEGMENT_MAX)
			seg = kept_segment(capacity);
		else
			seg = h->seg = dsm_create(capacity, 0);
		h->buf = dsm_segment_address(seg);
		slot->dsm = dsm_segment_handle(seg);
		slot->capacity = capacity;
	}
	else
	{
		h->buf = slot->buf;
		slot->dsm = DSM_HANDLE_INVALID;
		slot->capacity = GI_SLOT_INLINE;
	}
	if (call->in_size > 0)
		memcpy(h->buf, call->in, call->in_size);
	/* before: a polling service may take the request at once */
	h->t_queued = gi_now_ns();
	queue_request(slot, call);
}

/* the second half: wait for the answer and take it; returns the raw reply */
static void
submit_finish(GiCallAhead *h)
{
	GiSlot	   *slot = my_slot();
	GiCall	   *call = h->call;
	bool		search = call->type == GI_REQ_SEARCH;

	PG_TRY();
	{
		wait_for_answer(slot);
	}
	PG_CATCH();
	{
		abandon_request(slot);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (search)
		gi_last_search.t_woke = gi_now_ns();
	take_answer(slot, call, h->buf);
	if (search)
	{
		gi_last_search.t_copied = gi_now_ns();
		gi_last_search.t_submit = h->t_submit;
		gi_last_search.t_queued = h->t_queued;
		if (gi_last_search.t_first == 0)
			gi_last_search.t_first = h->t_submit;
		gi_last_search.requests++;
		gi_last_search.rargs = call->rargs;
	}

	if (h->seg)
		dsm_detach(h->seg);
	h->seg = NULL;
}

/* one submission; returns the raw reply */
static void
submit_once(GiCall *call)
{
	GiCallAhead h;

	submit_start(call, &h);
	submit_finish(&h);
}

/* a request the service died with this often is not tried again */
#define GI_MAX_RESTARTS		3

/*
 * Act on call's reply: true when the caller has its answer, false when
 * the request must be submitted again; ERROR replies raise the error.
 */
static bool
reply_final(GiCall *call, int *restarts)
{
	switch (call->reply)
	{
		case GI_REPLY_RESTARTED:
			/* the service died with our request: the new one gets it */
			if (++(*restarts) < GI_MAX_RESTARTS)
				return false;
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("the gpuindex device service restarted %d times while serving this request",
							*restarts),
					 errhint("The server log says why.")));
			break;
		case GI_REPLY_TOO_SMALL:
			call->out_capacity = call->rargs.out_needed;
			return false;
		case GI_REPLY_ERROR:
			ereport(ERROR,
					(errcode(call->rargs.sqlstate ? call->rargs.sqlstate : ERRCODE_INTERNAL_ERROR),
					 errmsg("%s", call->rargs.errmsg)));
			break;
		default:
			break;
	}
	return true;
}

void
gi_call(GiCall *call)
{
	int			restarts = 0;

	gi_require_service();
	do
		submit_once(call);
	while (!reply_final(call, &restarts));
}

GiCallAhead *
gi_call_ahead(GiCall *call)
{
	GiCallAhead *h = palloc(sizeof(GiCallAhead));

	gi_require_service();
	submit_start(call, h);
	return h;
}

void
gi_call_ahead_end(GiCallAhead *h)
{
	GiCall	   *call = h->call;
	int			restarts = 0;

	submit_finish(h);
	pfree(h);
	if (!reply_final(call, &restarts))
		gi_call(call);
}

void
gi_call_begin(GiCall *call)
{
	GiSlot	   *slot;

	gi_require_service();
	if (call->in_size > GI_SLOT_INLINE || call->out_capacity > GI_SLOT_INLINE)
		elog(ERROR, "a gpuindex request sent ahead needs %zu bytes, more than a slot's %d",
			 (size_t) Max(call->in_size, call->out_capacity), GI_SLOT_INLINE);
	slot = my_slot();
	wait_slot_idle(slot);
	queue_inline(slot, call);
}

bool
gi_call_detached(GiCall *call)
{
	GiSlot	   *slot;

	gi_require_service();
	if (call->in_size > GI_SLOT_INLINE || call->out_capacity > GI_SLOT_INLINE)
		return false;
	call->args.flags |= GI_REQ_DETACHED;
	slot = my_slot();
	wait_slot_idle(slot);
	queue_inline(slot, call);
	return true;
}

/*
 * Wait until the slot's request is answered and make the slot idle, at
 * most timeout_ms, without processing interrupts: for a backend that errors
 * out or exits (nothing here throws).  False when it gave up.
 */
static bool
unwinding_wait_done(GiSlot *slot, int timeout_ms)
{
	for (int waited = 0; !slot_settled(slot); waited++)
	{
		if (waited >= timeout_ms)
			return false;
		pg_usleep(1000L);
	}
	return true;
}

bool
gi_call_unwinding(const GiCall *call, int timeout_ms)
{
	GiSlot	   *slot;

	if (gi_shared == NULL || MyProc == NULL)
		return false;
	slot = my_slot();
	if (!unwinding_wait_done(slot, timeout_ms))
		return false;
	if (call == NULL)
		return true;
	queue_inline(slot, call);
	return unwinding_wait_done(slot, timeout_ms);
}

/*
 * An error while waiting here leaves the request queued: the service
 * still runs it, and this backend's next request waits until it has.
 */
void
gi_call_end(GiCall *call)
{
	GiSlot	   *slot = my_slot();
	int			restarts = 0;

	wait_for_answer(slot);
	take_answer(slot, call, slot->buf);
	if (!reply_final(call, &restarts))
		gi_call(call);
}

GiReply
gi_call_simple(GiReqType type, const GiStoreKey *key, const GiReqArgs *args,
			   GiRespArgs *rargs)
{
	GiCall		call;

	memset(&call, 0, sizeof(call));
	call.type = type;
	if (key)
		call.key = *key;
	if (args)
		call.args = *args;
	gi_call(&call);
	if (rargs)
		*rargs = call.rargs;
	return call.reply;
}

/* queue a request without a payload and return without waiting (test hooks) */
void
gi_queue_nowait(const GiCall *call)
{
	GiSlot	   *slot;

	gi_require_service();
	slot = my_slot();
	wait_slot_idle(slot);
	queue_inline(slot, call);
}

void
gi_queue_vanished(const GiCall *call)
{
	GiSlot	   *slot;
	dsm_segment *seg;

	gi_require_service();
	slot = my_slot();
	wait_slot_idle(slot);

	/* a segment of our own, gone once we detach: nobody else maps it */
	seg = dsm_create(Max(Max(call->in_size, call->out_capacity), GI_SLOT_INLINE + 1), 0);
	slot->dsm = dsm_segment_handle(seg);
	slot->capacity = dsm_segment_map_length(seg);
	dsm_detach(seg);
	queue_request(slot, call);
}
