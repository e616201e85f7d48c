/*
 * gi_client.h
 *		Backend side of the device service: send a request, sleep, read the
 *		answer.
 *
 * Usage: fill a GiCall (type, key, args, in/in_size, out_capacity), call
 * gi_call().  On return call->reply is one of GI_REPLY_OK, NOT_LOADED,
 * BUSY or ALREADY_LOADED (the others are handled inside: ERROR replies
 * become ereport(ERROR), TOO_SMALL and RESTARTED are retried), and
 * call->out (palloc'd in the caller's memory context, or NULL) holds
 * call->rargs.out_size bytes of answer.
 *
 * The wait honours query cancel, statement_timeout and postmaster death;
 * if the service is restarted while a request is in flight, the request is
 * resubmitted to the new service (which will usually answer NOT_LOADED,
 * after which the caller reloads from its index pages).
 */
#ifndef GI_CLIENT_H
#define GI_CLIENT_H

#include "gi_protocol.h"

typedef struct GiCall
{
	/* request */
	GiReqType	type;
	GiStoreKey	key;
	GiReqArgs	args;
	const void *in;
	Size		in_size;
	Size		out_capacity;	/* expected answer size; grown on demand */

	/* answer */
	GiReply		reply;
	GiRespArgs	rargs;
	void	   *out;
} GiCall;

/*
 * The times of this session's last search request (gi_now_ns): its payload
 * copy began, it was queued, its answer was seen and copied out; the
 * service's times and the compute backend's stages are in rargs.
 */
typedef struct GiSearchTimes
{
	uint64		t_first;		/* the first search request since
								 * gi_stages_begin (0: none yet) */
	uint64		t_submit;
	uint64		t_queued;
	uint64		t_woke;
	uint64		t_copied;
	uint32		requests;		/* search requests since gi_stages_begin */
	GiRespArgs	rargs;
} GiSearchTimes;

extern GiSearchTimes gi_last_search;

/* gpuindex.client_spin_us: how long a backend polls for its answer */
extern int	gi_client_spin_us;

/* gpuindex.trace_stages: search requests ask for the backend's stages */
extern bool gi_trace_stages;

/* ERROR unless gpuindex was preloaded (shared_preload_libraries) */
extern void gi_require_service(void);

extern void gi_call(GiCall *call);

/*
 * gi_call in two halves, for a caller with work to do while the service
 * answers: gi_call_begin queues call and returns; gi_call_end waits for
 * the answer and acts on it as gi_call does.  The payload (at most
 * GI_SLOT_INLINE bytes) travels in the slot, so a request once begun is
 * run even if this backend errors out before gi_call_end; call->in must
 * stay valid until then.  No other request of this backend may come
 * between the two.
 */
extern void gi_call_begin(GiCall *call);
extern void gi_call_end(GiCall *call);

/*
 * gi_call in two halves for a payload of any size: gi_call_ahead queues
 * call and returns at once; gi_call_ahead_end waits for the answer and acts
 * on it as gi_call does (call->in may go once gi_call_ahead returns).  No
 * other request of this backend may come between the two; should the
 * backend error out before the end, its next request waits until the
 * service has answered this one.
 */
typedef struct GiCallAhead GiCallAhead;
extern GiCallAhead *gi_call_ahead(GiCall *call);
extern void gi_call_ahead_end(GiCallAhead *h);

/*
 * Queue call (GI_REQ_DETACHED, payload in the slot) and never wait for its
 * answer: this backend's next request waits until the service has run it.
 * False, with nothing sent, when the payload does not fit a slot.
 */
extern bool gi_call_detached(GiCall *call);

/*
 * For a backend that errors out or exits with work the service must still
 * do: wait for this backend's request in flight to be answered, then send
 * call (NULL: none; payload in the slot) and wait for its answer, without
 * processing interrupts and without throwing, at most timeout_ms for each
 * wait.  False when it gave up (no service answered).
 */
extern bool gi_call_unwinding(const GiCall *call, int timeout_ms);

/* convenience: a call with no payload in either direction */
extern GiReply gi_call_simple(GiReqType type, const GiStoreKey *key,
							  const GiReqArgs *args, GiRespArgs *rargs);

/*
 * Test hook: queue call in this backend's slot with a payload segment
 * that no longer exists, and return without waiting for the answer, as a
 * backend that dies right after queueing leaves its slot.
 */
extern void gi_queue_nowait(const GiCall *call);
extern void gi_queue_vanished(const GiCall *call);

#endif							/* GI_CLIENT_H */
