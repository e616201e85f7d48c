/*
 * gi_reply.h
 *		A request in the device service's hands for one round, and the
 *		helpers every handler answers it with.
 */
#ifndef GI_REPLY_H
#define GI_REPLY_H

#include "postgres.h"

#include "gi_shmem.h"

/* one request taken from a slot for this round */
typedef struct GiWork
{
	GiSlot	   *slot;
	dsm_segment *seg;			/* attached payload segment, or NULL */
	char	   *buf;			/* payload: slot->buf or the segment */
	uint64		group;			/* search phase: the kind's grouping key */
	bool		answered;

	/*
	 * A batch search served a slice a round (gi_search.c): its queries
	 * copied out of the payload (the answer overwrites it), the queries
	 * answered so far.  It stays in the service's hands between rounds.
	 */
	char	   *sliced;			/* NULL unless sliced */
	Size		sliced_bytes;
	uint32		sliced_done;
	double		sliced_us;		/* its slices' cost per query (us); 0: none yet */

	/*
	 * carry: set by a handler that leaves the request unanswered for a
	 * later round (a k-means training running on its own thread); the
	 * request stays in the service's hands while its backend waits, and
	 * comes back with kept set.
	 */
	bool		carry;
	bool		kept;

	/*
	 * in_flight: its search was started on the compute backend and left
	 * running past its round (gi_search.c); a copy of the request in the
	 * flight is answered and published instead of this one.
	 */
	bool		in_flight;
} GiWork;

extern void gi_reply(GiWork *w, GiReply reply);
extern void gi_reply_error(GiWork *w, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);

/* a compute backend failure, with its message and a matching SQLSTATE */
extern void gi_reply_status(GiWork *w, gi_status st);

/*
 * A store that does not fit (the memory budget, or the device): answer
 * OVER_BUDGET with the reason, true; false for any other status.
 */
extern bool gi_reply_over_budget(GiWork *w, gi_status st);

/* ERROR when no compute backend is usable; true when one is */
extern bool gi_reply_check_backend(GiWork *w);

#endif							/* GI_REPLY_H */
