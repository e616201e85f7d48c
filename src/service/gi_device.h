/*
 * gi_device.h
 *		The compute backend the device service chose, and its devices.
 *
 * The service opens every device the backend offers (the host backend
 * has one; the CUDA backend one per visible GPU).  Each store lives on
 * one of them, and k-means jobs run on one; every backend call on a
 * store or job passes that device.
 */
#ifndef GI_DEVICE_H
#define GI_DEVICE_H

#include "postgres.h"

#include "gi_backend.h"

typedef struct GiDevice
{
	int			ordinal;		/* the backend's device number */
	gi_device  *dev;
	char		name[128];
} GiDevice;

/* the backend stores are created on; NULL when none is usable */
extern const gi_backend_ops *gi_ops;

/* why gi_ops is NULL (for the error every store request then gets) */
extern char gi_ops_unavailable[256];

/* the open devices of gi_ops, gi_ndevices >= 1 when gi_ops is set */
extern GiDevice *gi_devices;
extern int	gi_ndevices;

extern void gi_device_init(void);

/*
 * gpuindex.host_threads, applied in any process (builds run the host
 * k-means in their own backend): the host backend's threads, and the
 * chosen backend's when it is another one with host-side work.
 */
extern void gi_device_set_host_threads(uint32 n);

/*
 * The calling thread is one of the service's background jobs (a k-means
 * training): its host-side work runs on itself alone, leaving the host
 * backend's threads and the other cores to the searches.
 */
extern void gi_device_background_thread(void);

/*
 * Test hook: a real fault inside the CUDA backend (an illegal write from a
 * kernel); *have is false without the CUDA backend.
 */
extern gi_status gi_device_debug_cuda_fault(bool *have);
extern void gi_device_debug_thread_fault(const char **why);

#endif							/* GI_DEVICE_H */
