/*
 * gi_worker.c
 *		The device service: a background worker that owns the compute
 *		backend and every index store, and answers backends' requests in
 *		batches.
 *
 * One loop: collect every queued request (optionally lingering a few
 * microseconds for more, gpuindex.batch_linger_us), hand the whole round
 * to gi_dispatch_round(), which merges the requests of each store into as
 * few backend calls as it can, publish the answers, then sleep on the
 * latch until a backend sets it.  Every request taken into a round is
 * answered and its slot released, whatever happens to it.
 * The service is not connected to any database; backends read index pages
 * and send what the service needs.
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_device.h"
#include "gi_dispatch.h"
#include "gi_kmeans_jobs.h"
#include "gi_service.h"
#include "gi_store_requests.h"
#include "gi_stores.h"

PGDLLEXPORT void gi_service_main(Datum main_arg);

uint64		gi_requests_total = 0;
TimestampTz gi_last_fresh_request = 0;
uint64		gi_rounds_total = 0;
uint64		gi_round_ns_total = 0;
uint64		gi_search_ns_total = 0;
uint64		gi_requests_by_type[GI_REQ_NTYPES];

static void
gi_service_detach(int code, Datum arg)
{
	SpinLockAcquire(&gi_shared->mutex);
	if (gi_shared->service_pid == MyProcPid)
	{
		gi_shared->service_pid = 0;
		gi_shared->service_latch = NULL;
	}
	SpinLockRelease(&gi_shared->mutex);
}

/*
 * Requests a previous incarnation was running when it died will never be
 * answered by it: tell their backends to resubmit.  Queued ones stay
 * queued for us.
 */
static void
recover_slots(void)
{
	for (int i = 0; i < gi_shared->nslots; i++)
	{
		GiSlot	   *slot = &gi_shared->slots[i];
		Latch	   *latch = NULL;

		SpinLockAcquire(&slot->mutex);
		if (slot->state == GI_SLOT_RUNNING)
		{
			slot->reply = GI_REPLY_RESTARTED;
			slot->state = GI_SLOT_DONE;
			latch = slot->latch;
		}
		else if (slot->state == GI_SLOT_ABANDONED)
			slot->state = GI_SLOT_IDLE;
		SpinLockRelease(&slot->mutex);
		if (latch)
			SetLatch(latch);
	}
}

/*
 * Take queued requests into work[]; drop abandoned ones.  *reads is set
 * when a request that reads stores (a search, the statistics) was taken.
 */
static int
collect(GiWork *work, int nwork, int max, bool *reads)
{
	static int	paused_for = 0;
	bool		later = nwork > 0;

	for (int i = 0; i < gi_shared->nslots && nwork < max; i++)
	{
		GiSlot	   *slot = &gi_shared->slots[i];
		bool		take = false;

		/* the test hook of gpuindex.debug_collect_pause_pid, once per value: after its slot */
		if (later && i > 0 && gi_debug_collect_pause_pid != 0 &&
			gi_debug_collect_pause_pid != paused_for &&
			gi_shared->slots[i - 1].pid == gi_debug_collect_pause_pid)
		{
			paused_for = gi_debug_collect_pause_pid;
			ereport(LOG,
					(errmsg("gpuindex device service: pausing %d ms after the slot of process %d in a later pass (gpuindex.debug_collect_pause_pid)",
							GI_DEBUG_COLLECT_PAUSE_MS, paused_for)));
			pg_usleep(GI_DEBUG_COLLECT_PAUSE_MS * 1000L);
		}

		/* unlocked peek: the common case is an idle slot */
		if (slot->state != GI_SLOT_QUEUED && slot->state != GI_SLOT_ABANDONED)
			continue;

		SpinLockAcquire(&slot->mutex);
		if (slot->state == GI_SLOT_QUEUED)
		{
			slot->state = GI_SLOT_RUNNING;
			slot->rargs.t_taken = gi_now_ns();
			take = true;
		}
		else if (slot->state == GI_SLOT_ABANDONED)
			slot->state = GI_SLOT_IDLE;
		SpinLockRelease(&slot->mutex);

		if (take)
		{
			GiWork	   *w = &work[nwork++];

			gi_last_fresh_request = GetCurrentTimestamp();
			w->slot = slot;
			w->seg = NULL;
			w->buf = slot->buf;
			w->group = 0;
			w->answered = false;
			w->sliced = NULL;
			w->sliced_bytes = 0;
			w->sliced_done = 0;
			w->sliced_us = 0;
			w->carry = false;
			w->kept = false;
			w->in_flight = false;
			if (slot->type == GI_REQ_SEARCH || slot->type == GI_REQ_STATS)
				*reads = true;
		}
	}
	return nwork;
}

/*
 * Passes of collect() until one takes no request that reads stores: a
 * search taken by a pass may have begun after a commit whose INSERT, sent
 * without waiting, was queued in a slot that pass had already passed, and
 * only a later pass finds it.  A taken slot is not queued again before it
 * is answered, so this ends within nslots passes.
 */
static int
collect_closed(GiWork *work, int nwork, int max)
{
	bool		reads;

	do
	{
		reads = false;
		nwork = collect(work, nwork, max, &reads);
	} while (reads && nwork < max);
	return nwork;
}

/*
 * The service's mapping of each slot's last kept payload segment (at most
 * GI_KEPT_SEGMENT_MAX: a session's kept one, gi_client.c), so that a
 * session's next request in it costs no attach; forgotten when the service
 * goes to sleep, so that a session that left holds nothing for long.
 */
static dsm_segment **slot_segs;

/* the payload segment of slot i, mapped */
static dsm_segment *
payload_attach(int i, dsm_handle h)
{
	dsm_segment *seg = slot_segs[i];

	if (seg != NULL && dsm_segment_handle(seg) == h)
		return seg;
	if (seg != NULL)
		dsm_detach(seg);
	slot_segs[i] = NULL;
	seg = dsm_attach(h);
	if (seg != NULL)
	{
		dsm_pin_mapping(seg);
		if (dsm_segment_map_length(seg) <= GI_KEPT_SEGMENT_MAX)
			slot_segs[i] = seg;
	}
	return seg;
}

/* done with w's payload: a request's own segment is unmapped, a kept one stays */
static void
payload_release(GiWork *w)
{
	if (w->seg != NULL && slot_segs[w->slot - gi_shared->slots] != w->seg)
		dsm_detach(w->seg);
	w->seg = NULL;
}

static void
payloads_forget(void)
{
	for (int i = 0; i < gi_shared->nslots; i++)
		if (slot_segs[i] != NULL)
		{
			dsm_detach(slot_segs[i]);
			slot_segs[i] = NULL;
		}
}

/*
 * Requests still in our hands from the last round (sliced searches,
 * gi_search.c; requests a handler carries, such as a k-means training
 * running on its own thread) go first into work[]; one whose backend gave
 * up on it (a cancelled statement) is dropped here, so that it costs no
 * more work.
 */
static GiWork *carried;
static int	ncarried;

/* flights of at most this many requests are answered before the next starts */
#define GI_PUBLISH_FIRST_MAX	4

/* how often requests that only wait are looked at again */
#define GI_CARRIED_POLL_MS	1

/* whether one of work[0..n) has a slice to run (the others only wait) */
static bool
any_sliced(const GiWork *w, int n)
{
	for (int i = 0; i < n; i++)
		if (w[i].sliced != NULL)
			return true;
	return false;
}

static int
take_carried(GiWork *work)
{
	int			n = 0;

	for (int i = 0; i < ncarried; i++)
	{
		GiWork	   *w = &carried[i];
		GiSlot	   *slot = w->slot;
		bool		keep;

		SpinLockAcquire(&slot->mutex);
		keep = slot->state == GI_SLOT_RUNNING;
		if (!keep)
			slot->state = GI_SLOT_IDLE;
		SpinLockRelease(&slot->mutex);
		if (keep)
		{
			work[n] = *w;
			work[n].carry = false;
			work[n].kept = true;
			n++;
			continue;
		}
		if (w->sliced != NULL)
			elog(DEBUG1, "gpuindex device service: dropped a cancelled batch search after %u of %u queries",
				 w->sliced_done, slot->args.n);
		else
			elog(DEBUG1, "gpuindex device service: dropped a cancelled request of type %d",
				 (int) slot->type);
		payload_release(w);
		if (w->sliced)
			pfree(w->sliced);
	}
	ncarried = 0;
	return n;
}

/*
 * Map payload segments.  A request whose segment vanished (its backend
 * left) or whose sizes do not fit its buffer is answered with an error
 * here and stays in the round, so that finish_round releases its slot;
 * the dispatcher passes over answered requests.
 */
static void
attach_payloads(GiWork *work, int nwork)
{
	for (int i = 0; i < nwork; i++)
	{
		GiWork	   *w = &work[i];
		GiSlot	   *slot = w->slot;
		Size		buflen = GI_SLOT_INLINE;

		if (w->kept)
			continue;			/* carried: attached and checked before */

		if (slot->dsm != DSM_HANDLE_INVALID)
		{
			w->seg = payload_attach(slot - gi_shared->slots, slot->dsm);
			if (w->seg == NULL)
			{
				gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
							   "gpuindex request payload vanished");
				continue;
			}
			w->buf = dsm_segment_address(w->seg);
			buflen = dsm_segment_map_length(w->seg);
		}
		if (slot->capacity > buflen || slot->in_size > slot->capacity)
			gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION,
						   "malformed gpuindex request: %zu bytes of payload, %zu of room, in a buffer of %zu",
						   (size_t) slot->in_size, (size_t) slot->capacity, (size_t) buflen);
	}
}

/* publish answers and wake the backends; keep unfinished carried requests */
static void
finish_round(GiWork *work, int nwork)
{
	for (int i = 0; i < nwork; i++)
	{
		GiWork	   *w = &work[i];
		GiSlot	   *slot = w->slot;
		Latch	   *latch = NULL;

		if (w->in_flight)
			continue;			/* its flight's copy is published instead */
		if ((w->sliced != NULL || w->carry) && !w->answered)
		{
			carried[ncarried++] = *w;
			continue;
		}
		if (w->sliced != NULL)
		{
			pfree(w->sliced);
			w->sliced = NULL;
		}
		if (!w->answered)
			gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
						   "gpuindex device service did not answer request type %d",
						   (int) slot->type);
		payload_release(w);
		slot->rargs.t_answered = gi_now_ns();
		SpinLockAcquire(&slot->mutex);
		if (slot->state == GI_SLOT_RUNNING)
		{
			slot->state = GI_SLOT_DONE;
			latch = slot->latch;
		}
		else					/* abandoned meanwhile */
			slot->state = GI_SLOT_IDLE;
		SpinLockRelease(&slot->mutex);
		if (latch)
			SetLatch(latch);
	}
}

bool		gi_service_restart_pending = false;

/* where a fault signal inside the service lands: a clean exit from there */
static sigjmp_buf fault_env;
static volatile sig_atomic_t fault_env_set = false;
static pthread_t service_thread;

/*
 * A fault on the service's thread jumps to the clean exit.  One on a
 * thread of the host backend's pool cannot jump there (the jump buffer
 * belongs to the service's stack): that thread hands the signal to the
 * service's thread, which is waiting for it or working beside it, and
 * stops for good; the exit ends it with the process.
 */
static void
service_fault(SIGNAL_ARGS)
{
	if (fault_env_set && pthread_equal(pthread_self(), service_thread))
		siglongjmp(fault_env, postgres_signal_arg);
	if (fault_env_set)
	{
		sigset_t	all;

		pthread_kill(service_thread, postgres_signal_arg);
		sigfillset(&all);
		for (;;)
			sigsuspend(&all);
	}
	pqsignal(postgres_signal_arg, SIG_DFL);
	raise(postgres_signal_arg);
}

/*
 * Leave with exit code 1 through proc_exit, so that the postmaster restarts
 * the service alone (a death by signal, or an exit without proc_exit, makes
 * it reset the whole cluster).  Requests of the round in progress are
 * answered RESTARTED by the next service and resubmitted by their backends.
 */
static void
service_restart(const char *why)
{
	ereport(LOG,
			(errmsg("gpuindex device service: %s; restarting the service", why)));
	proc_exit(1);
}

/* publish the answers of the searches that landed (gi_search.c) */
static void
publish_landed(void)
{
	GiWork	   *landed;
	int			n = gi_search_landed(&landed);

	if (n > 0)
	{
		finish_round(landed, n);
		gi_search_landed_clear();
	}
}

/*
 * One round over work[0..nwork): payloads, the requests, the answers.  A
 * search left in flight by the round before lands once the payloads are
 * mapped, before anything else calls the compute backend; its answers are
 * published after this round's requests were dispatched, while this
 * round's own search may be in flight.
 */
static void
run_round(GiWork *work, int nwork, MemoryContext round_cxt)
{
	uint64		t0 = gi_now_ns();

	MemoryContextSwitchTo(round_cxt);
	PG_TRY();
	{
		attach_payloads(work, nwork);
		gi_search_land();
		gi_kmeans_maintain();
		gi_stores_end_recovery();
		(void) gi_stores_sweep_dropped();
		gi_dispatch_round(work, nwork);
	}
	PG_CATCH();
	{
		/*
		 * A PostgreSQL error inside the service (out of memory, say) fails
		 * this round's requests, not the service and its stores.
		 */
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		FlushErrorState();
		for (int i = 0; i < nwork; i++)
			if (!work[i].answered && !work[i].in_flight)
				gi_reply_error(&work[i], edata->sqlerrcode,
							   "gpuindex device service: %s", edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	/* after the drops, which land a flight whose store goes */
	gi_drop_stores_of_lost_inserts(work, nwork);
	publish_landed();
	finish_round(work, nwork);
	gi_round_ns_total += gi_now_ns() - t0;
	if (gi_service_restart_pending)
		service_restart("the compute backend reported a device error");
	MemoryContextSwitchTo(TopMemoryContext);
	MemoryContextReset(round_cxt);
}

void
gi_service_main(Datum main_arg)
{
	MemoryContext round_cxt;
	GiWork	   *work;
	int			maxwork = gi_shared->nslots;
	TimestampTz spin_until = 0;
	bool		waiting;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	pgstat_report_appname("gpuindex device service");
	gi_device_init();
	gi_stores_init();

	round_cxt = AllocSetContextCreate(TopMemoryContext, "gpuindex round",
									  ALLOCSET_DEFAULT_SIZES);
	work = MemoryContextAllocZero(TopMemoryContext, sizeof(GiWork) * maxwork);
	carried = MemoryContextAllocZero(TopMemoryContext, sizeof(GiWork) * maxwork);
	slot_segs = MemoryContextAllocZero(TopMemoryContext, sizeof(dsm_segment *) * maxwork);

	before_shmem_exit(gi_service_detach, (Datum) 0);
	SpinLockAcquire(&gi_shared->mutex);
	gi_shared->generation++;
	gi_shared->service_pid = MyProcPid;
	gi_shared->service_latch = MyLatch;
	gi_shared->service_started = GetCurrentTimestamp();
	gi_shared->host_searches = gi_ops == NULL || strcmp(gi_ops->name, "cpu") == 0;
	SpinLockRelease(&gi_shared->mutex);
	recover_slots();

	if (sigsetjmp(fault_env, 1) != 0)
	{
		/* a fault inside the compute backend: nothing here is to be trusted */
		fault_env_set = false;
		PG_exception_stack = NULL;
		error_context_stack = NULL;
		HOLD_INTERRUPTS();
		service_restart("fatal fault (signal) inside the service");
	}
	service_thread = pthread_self();
	fault_env_set = true;
	pqsignal(SIGSEGV, service_fault);
	pqsignal(SIGBUS, service_fault);
	pqsignal(SIGILL, service_fault);
	pqsignal(SIGFPE, service_fault);

	for (;;)
	{
		int			nwork;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* a second pass also takes what was queued behind the first */
		nwork = collect_closed(work, 0, maxwork);
		if (nwork > 0)
			nwork = collect_closed(work, nwork, maxwork);

		/*
		 * While the device searches, take the requests that come: they
		 * start as one search when it is done.
		 */
		while (gi_search_flying() && !gi_search_flight_done() && nwork < maxwork)
		{
			CHECK_FOR_INTERRUPTS();
			pg_spin_delay();
			nwork = collect_closed(work, nwork, maxwork);
		}

		/*
		 * A small flight's answers go out before the next search starts:
		 * waking few sessions costs little device time, and their answers
		 * would otherwise wait for the next search's launch.  A large
		 * flight's wake-ups overlap the next search (run_round).
		 */
		if (gi_search_flying() &&
			(nwork == 0 || gi_search_flight_requests() <= GI_PUBLISH_FIRST_MAX))
		{
			MemoryContextSwitchTo(round_cxt);
			gi_search_land();
			publish_landed();
			MemoryContextSwitchTo(TopMemoryContext);
			if (nwork == 0)
			{
				spin_until = GetCurrentTimestamp() + gi_service_spin_us;
				continue;
			}
		}
		waiting = ncarried > 0 || gi_kmeans_training();
		if (nwork == 0 && !waiting && GetCurrentTimestamp() < spin_until)
		{
			/*
			 * Right after a round more requests are likely (a client's next
			 * query); polling briefly saves the latch wake-up, which costs
			 * more than the request itself.
			 */
			pg_spin_delay();
			continue;
		}
		if (nwork == 0 && !any_sliced(carried, ncarried))
		{
			bool		sweep = gi_stores_sweep_dropped();
			long		ms = waiting ? GI_CARRIED_POLL_MS : sweep ? GI_STORE_SWEEP_MS : -1L;
			int			rc;

			/*
			 * Requests that only wait (for a k-means thread) are looked at
			 * again after a short sleep, not in a busy loop.
			 */
			if (!waiting)
				payloads_forget();
			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						   (ms >= 0 ? WL_TIMEOUT : 0), ms, PG_WAIT_EXTENSION);
			if (!waiting || (rc & WL_LATCH_SET))
				continue;
		}
		if (nwork > 0 && gi_batch_linger_us > 0 && nwork < maxwork)
		{
			/* trade a little latency for larger batches */
			pg_usleep(gi_batch_linger_us);
			nwork = collect_closed(work, nwork, maxwork);
		}

		/*
		 * New requests first, answered at the end of their own round; then
		 * a slice of each sliced batch search in a round of their own, so
		 * that a request that arrived during a slice waits for the rest of
		 * that slice only.
		 */
		if (nwork > 0)
		{
			gi_rounds_total++;
			gi_requests_total += nwork;
			for (int i = 0; i < nwork; i++)
				if (work[i].slot->type > 0 && work[i].slot->type < GI_REQ_NTYPES)
					gi_requests_by_type[work[i].slot->type]++;
			run_round(work, nwork, round_cxt);
		}
		nwork = take_carried(work);
		if (nwork > 0 || gi_kmeans_training())
		{
			/*
			 * The slices of large batches run on one host thread, so that
			 * the sessions waiting meanwhile keep the other cores.
			 */
			bool		slices = any_sliced(work, nwork);

			if (slices)
				gi_device_set_host_threads(1);
			run_round(work, nwork, round_cxt);
			if (slices)
				gi_device_set_host_threads((uint32) gi_host_threads);
		}
		spin_until = GetCurrentTimestamp() + gi_service_spin_us;
	}
}
