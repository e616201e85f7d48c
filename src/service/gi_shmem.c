/*
 * gi_shmem.c
 *		Shared memory of the device service.
 *
 * Requested at postmaster start (shmem_request_hook, PostgreSQL 15) when
 * gpuindex is in shared_preload_libraries; without the preload gi_shared
 * stays NULL and every entry point reports what to set.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "access/twophase.h"

#include "gi_shmem.h"

GiShared   *gi_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* one slot per PGPROC, so any process can be a client */
static int
gi_slot_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
gi_shmem_size(void)
{
	return add_size(offsetof(GiShared, slots),
					mul_size(gi_slot_count(), sizeof(GiSlot)));
}

static void
gi_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(gi_shmem_size());
}

static void
gi_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	gi_shmem_attach();
}

void
gi_shmem_register(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gi_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gi_shmem_startup;
}

void
gi_shmem_attach(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gi_shared = ShmemInitStruct("gpuindex device service", gi_shmem_size(), &found);
	if (!found)
	{
		int			n = gi_slot_count();

		memset(gi_shared, 0, offsetof(GiShared, slots));
		SpinLockInit(&gi_shared->mutex);
		pg_atomic_init_u32(&gi_shared->waiting, 0);
		gi_shared->nslots = n;
		for (int i = 0; i < n; i++)
		{
			GiSlot	   *slot = &gi_shared->slots[i];

			SpinLockInit(&slot->mutex);
			slot->state = GI_SLOT_IDLE;
			slot->latch = NULL;
			slot->dsm = DSM_HANDLE_INVALID;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
gi_wake_service(void)
{
	Latch	   *latch;

	SpinLockAcquire(&gi_shared->mutex);
	latch = gi_shared->service_latch;
	SpinLockRelease(&gi_shared->mutex);
	if (latch)
		SetLatch(latch);
}
