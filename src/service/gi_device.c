/*
 * gi_device.c
 *		Choosing the compute backend inside the device service, and opening
 *		its devices.
 *
 * The CUDA backend is a separate shared object (gpuindex_cuda.so, next to
 * gpuindex.so) that only the service dlopens: gpuindex.so itself never
 * links CUDA, so it loads on machines with no driver or toolkit, and CUDA
 * is initialised in the one process that uses it.
 */
#include "postgres.h"

#include <dlfcn.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "gi_cuda_test.h"
#include "gi_device.h"
#include "gi_kind.h"
#include "gi_service.h"
#include "host_pool.h"
#include "host_store.h"

const gi_backend_ops *gi_ops = NULL;
char		gi_ops_unavailable[256];
GiDevice   *gi_devices = NULL;
int			gi_ndevices = 0;

/*
 * gpuindex.debug_service_kmeans: the host backend with kmeans entries, so
 * that CREATE INDEX's k-means requests take the path they take with CUDA.
 */
static gi_backend_ops gi_host_ops_kmeans;

static gi_status
host_kmeans_train(const gi_kmeans_params *params, uint32_t n, const float *samples,
				  float *centroids, uint32_t *nproduced)
{
	size_t		bytes = (size_t) n * params->dim * sizeof(float);
	float	   *copy = malloc(bytes > 0 ? bytes : 1);
	void	   *ws = malloc(gi_host_kmeans_workspace(n, params->dim, params->nlists));

	if (copy == NULL || ws == NULL)
	{
		free(copy);
		free(ws);
		gi_host_set_error("out of memory for k-means of %u samples", n);
		return GI_ERR_NOMEM;
	}
	memcpy(copy, samples, bytes);
	*nproduced = gi_host_kmeans_train(params, n, copy, centroids, ws, NULL, NULL);
	free(copy);
	free(ws);
	if (params->keep_going && !params->keep_going(params->keep_going_arg))
	{
		gi_host_set_error("k-means training stopped by its caller");
		return GI_ERR_CANCELLED;
	}
	return GI_OK;
}

/* the entries the service needs from a backend, or false with why */
static bool
backend_complete(const gi_backend_ops *ops, const char *path, char *why, size_t whylen)
{
	if (ops->store_create == NULL || ops->store_destroy == NULL ||
		ops->store_insert == NULL || ops->store_delete == NULL ||
		ops->store_stats == NULL || ops->device_open == NULL ||
		ops->device_name == NULL)
	{
		snprintf(why, whylen, "the backend in \"%s\" does not implement the store yet", path);
		return false;
	}
	/*
	 * A kind the backend cannot search does not make it unusable for the
	 * others: loading a store of that kind is refused with a clear error
	 * (gi_loading.c), and the log says so now.
	 */
	for (int kind = 0; kind < GI_KIND_COUNT; kind++)
	{
		const GiServiceKind *sk = gi_kind_get(kind);

		if (sk && (ops->kinds[kind] == NULL || ops->kinds[kind]->search == NULL))
			ereport(LOG,
					(errmsg("gpuindex: the backend in \"%s\" does not search %s stores; indexes of that kind need gpuindex.device = cpu",
							path, sk->name)));
	}
	return true;
}

/* the CUDA module once loaded (for its test hooks) */
static void *gi_cuda_module;

/* the CUDA backend, or NULL with the reason in why */
static const gi_backend_ops *
load_cuda(char *why, size_t whylen)
{
	char		pkglib[MAXPGPATH];
	char		path[MAXPGPATH];
	void	   *handle;
	gi_backend_entry_fn entry;
	const gi_backend_ops *ops;

	get_pkglib_path(my_exec_path, pkglib);
	snprintf(path, sizeof(path), "%s/gpuindex_cuda.so", pkglib);

	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL)
	{
		snprintf(why, whylen, "could not load \"%s\": %s", path, dlerror());
		return NULL;
	}
	entry = (gi_backend_entry_fn) dlsym(handle, GI_CUDA_ENTRY_SYMBOL);
	if (entry == NULL || (ops = entry()) == NULL)
	{
		snprintf(why, whylen, "\"%s\" has no usable entry point", path);
		return NULL;
	}
	if (ops->device_count == NULL || ops->device_count() <= 0)
	{
		snprintf(why, whylen, "no CUDA device found (%s)",
				 ops->last_error ? ops->last_error() : "no device_count entry");
		return NULL;
	}
	if (!backend_complete(ops, path, why, whylen))
		return NULL;
	gi_cuda_module = handle;
	return ops;
}

gi_status
gi_device_debug_cuda_fault(bool *have)
{
	gi_cuda_debug_illegal_address_fn fault = NULL;

	if (gi_ops != NULL && strcmp(gi_ops->name, "cuda") == 0 && gi_cuda_module != NULL)
		fault = (gi_cuda_debug_illegal_address_fn)
			dlsym(gi_cuda_module, GI_CUDA_DEBUG_ILLEGAL_ADDRESS);
	*have = fault != NULL;
	return fault ? fault() : GI_ERR_UNSUPPORTED;
}

/*
 * Test hook: a fault on a helper thread of the host backend's pool (every
 * compute backend's service runs host work there); returns only when no
 * helper could take it, with the reason in *why.
 */
void
gi_device_debug_thread_fault(const char **why)
{
	(void) gi_host_pool_debug_fault();
	*why = gi_host_last_error();
}

static void
close_devices(const gi_backend_ops *ops)
{
	for (int i = 0; i < gi_ndevices; i++)
		if (ops->device_close)
			ops->device_close(gi_devices[i].dev);
	gi_ndevices = 0;
}

/*
 * Open the devices of ops: one object per device it has, or with
 * gpuindex.devices that many objects over its devices in turn; false with
 * the reason in why when none opens.  A device that fails to open is left
 * out with a LOG line.
 */
static bool
open_devices(const gi_backend_ops *ops, char *why, size_t whylen)
{
	int			count = ops->device_count ? ops->device_count() : 1;
	int			wanted = gi_devices_wanted > 0 ? gi_devices_wanted : count;

	if (count <= 0)
	{
		snprintf(why, whylen, "the %s backend has no device", ops->name);
		return false;
	}
	if (gi_devices)
		pfree(gi_devices);
	gi_devices = MemoryContextAllocZero(TopMemoryContext, sizeof(GiDevice) * wanted);
	gi_ndevices = 0;
	for (int i = 0; i < wanted; i++)
	{
		int			ordinal = i % count;
		GiDevice   *d = &gi_devices[gi_ndevices];
		gi_status	st = ops->device_open(ordinal, &d->dev);

		if (st != GI_OK)
		{
			snprintf(why, whylen, "device %d of the %s backend does not open: %s",
					 ordinal, ops->name, ops->last_error());
			ereport(LOG, (errmsg("gpuindex device service: %s", why)));
			continue;
		}
		d->ordinal = ordinal;
		strlcpy(d->name, ops->device_name(d->dev), sizeof(d->name));
		gi_ndevices++;
	}
	return gi_ndevices > 0;
}

/* the backend gpuindex.device asks for, or NULL with the reason in why */
static const gi_backend_ops *
choose_backend(char *why, size_t whylen)
{
	const gi_backend_ops *ops;

	switch (gi_device_choice)
	{
		case GI_DEVICE_CPU:
			ops = gi_host_backend();
			if (gi_debug_service_kmeans)
			{
				gi_host_ops_kmeans = *ops;
				gi_host_ops_kmeans.kmeans_train = host_kmeans_train;
				gi_host_ops_kmeans.kmeans_assign = gi_host_kmeans_assign;
				ops = &gi_host_ops_kmeans;
			}
			return ops;
		case GI_DEVICE_CUDA:
			ops = load_cuda(why, whylen);
			if (ops && !open_devices(ops, why, whylen))
				ops = NULL;
			if (ops == NULL)
			{
				snprintf(gi_ops_unavailable, sizeof(gi_ops_unavailable),
						 "gpuindex.device is \"cuda\" but %s", why);
				ereport(LOG, (errmsg("gpuindex device service: %s", gi_ops_unavailable)));
			}
			return ops;
		case GI_DEVICE_AUTO:
			ops = load_cuda(why, whylen);
			if (ops && !open_devices(ops, why, whylen))
				ops = NULL;
			if (ops == NULL)
			{
				ereport(LOG,
						(errmsg("gpuindex device service: using the host backend: %s", why)));
				ops = gi_host_backend();
			}
			return ops;
	}
	return NULL;
}

void
gi_device_background_thread(void)
{
	gi_host_pool_set_alone(true);
}

void
gi_device_set_host_threads(uint32 n)
{
	const gi_backend_ops *host = gi_host_backend();

	host->set_host_threads(n);
	if (gi_ops != NULL && gi_ops->set_host_threads != NULL &&
		gi_ops->set_host_threads != host->set_host_threads)
		gi_ops->set_host_threads(n);
}

void
gi_device_init(void)
{
	char		why[256] = "";

	gi_ops_unavailable[0] = '\0';
	gi_ndevices = 0;
	gi_ops = choose_backend(why, sizeof(why));
	if (gi_ops == NULL)
		return;
	gi_device_set_host_threads((uint32) gi_host_threads);

	/* the host backend: its devices are opened here */
	if (gi_ndevices == 0 && !open_devices(gi_ops, why, sizeof(why)))
	{
		close_devices(gi_ops);
		snprintf(gi_ops_unavailable, sizeof(gi_ops_unavailable), "%s", why);
		ereport(LOG, (errmsg("gpuindex device service: %s", gi_ops_unavailable)));
		gi_ops = NULL;
		return;
	}
	for (int i = 0; i < gi_ndevices; i++)
		ereport(LOG,
				(errmsg("gpuindex device service: backend \"%s\" on %s (device %d of the service: the backend's device %d)",
						gi_ops->name, gi_devices[i].name, i, gi_devices[i].ordinal)));
}
