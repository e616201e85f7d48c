/*
 * gi_service.h
 *		The device service process: its settings (defined in gpuindex.c)
 *		and its request counters (gi_worker.c).
 *
 * Everything declared under src/service/ that is not the client side
 * (gi_client.h, gi_shmem.h) runs only in the service's main thread.
 */
#ifndef GI_SERVICE_H
#define GI_SERVICE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "gi_protocol.h"

/* gpuindex.device */
typedef enum GiDeviceChoice
{
	GI_DEVICE_AUTO,
	GI_DEVICE_CPU,
	GI_DEVICE_CUDA
} GiDeviceChoice;

extern int	gi_device_choice;

/* gpuindex.devices: 0, or how many device objects the service opens */
extern int	gi_devices_wanted;

#define GI_MAX_DEVICES 64
extern int	gi_memory_limit_mb;
extern int	gi_role_memory_limit_mb;
extern int	gi_batch_linger_us;
extern int	gi_service_spin_us;

/* gpuindex.service_overlap */
typedef enum GiOverlap
{
	GI_OVERLAP_AUTO = 0,
	GI_OVERLAP_OFF,
	GI_OVERLAP_ON
} GiOverlap;
extern int	gi_service_overlap;
extern int	gi_search_slice_ms;
extern int	gi_host_threads;
extern bool gi_debug_service_kmeans;
extern int	gi_debug_collect_pause_pid;

/* how long the pause of gpuindex.debug_collect_pause_pid lasts */
#define GI_DEBUG_COLLECT_PAUSE_MS	1000

/* service-wide counters, for gpuindex_service() */
extern uint64 gi_requests_total;

/* when the service last took a new request (sliced searches size their slices by it) */
extern TimestampTz gi_last_fresh_request;
extern uint64 gi_rounds_total;
extern uint64 gi_round_ns_total;	/* wall time in rounds that had work */
extern uint64 gi_search_ns_total;	/* of it, in the compute backend's searches */
extern uint64 gi_requests_by_type[GI_REQ_NTYPES];

/*
 * Set when the compute backend reported a device error: the device may be
 * unusable (a sticky CUDA error poisons the context), so the service
 * finishes the round and exits for the postmaster to restart it alone.
 */
extern bool gi_service_restart_pending;

#endif							/* GI_SERVICE_H */
