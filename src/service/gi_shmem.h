/*
 * gi_shmem.h
 *		Shared memory of the device service: one request slot per process.
 */
#ifndef GI_SHMEM_H
#define GI_SHMEM_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "gi_protocol.h"

/*
 * Slot life cycle.  The backend moves IDLE -> QUEUED and, on reading the
 * answer, DONE -> IDLE.  The service moves QUEUED -> RUNNING -> DONE.  A
 * backend leaving on an error (cancel, statement_timeout) marks its
 * request ABANDONED; the service then drops it (if still queued) or sets
 * IDLE instead of DONE when it finishes, and the backend waits for IDLE
 * before reusing the slot, so the service never writes into a buffer the
 * backend has started to fill again.
 */
typedef enum GiSlotState
{
	GI_SLOT_IDLE = 0,
	GI_SLOT_QUEUED,
	GI_SLOT_RUNNING,
	GI_SLOT_DONE,
	GI_SLOT_ABANDONED
} GiSlotState;

typedef struct GiSlot
{
	slock_t		mutex;			/* protects state */
	GiSlotState state;
	Latch	   *latch;			/* the requesting backend's latch */
	int			pid;
	uint64		seq;			/* per-slot request number, for ordering */

	GiReqType	type;
	GiStoreKey	key;
	GiReqArgs	args;
	Size		in_size;		/* payload bytes of the request */
	Size		capacity;		/* bytes available for payload (in and out) */
	dsm_handle	dsm;			/* DSM_HANDLE_INVALID: payload is inline */

	GiReply		reply;
	GiRespArgs	rargs;

	/* keep the buffer aligned for uint64 and float payloads */
	char		buf[GI_SLOT_INLINE] pg_attribute_aligned(16);
} GiSlot;

typedef struct GiShared
{
	slock_t		mutex;			/* protects the fields below */
	int			service_pid;	/* 0 while no service runs */
	Latch	   *service_latch;
	uint64		generation;		/* bumped at every service start */
	TimestampTz service_started;
	bool		host_searches;	/* the service searches on the host's cores
								 * (the host backend), which sessions share */
	uint64		seq;			/* request counter, for FIFO within a round */

	pg_atomic_uint32 waiting;	/* sessions waiting for an answer (no mutex) */

	int			nslots;
	GiSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} GiShared;

extern GiShared *gi_shared;

extern void gi_shmem_register(void);
extern void gi_shmem_attach(void);

/* wake the service if it runs */
extern void gi_wake_service(void);

#endif							/* GI_SHMEM_H */
