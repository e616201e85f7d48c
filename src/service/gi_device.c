/*
 * gi_device.c
 *		Choosing the compute backend inside the device service.
 *
 * The CUDA backend is a separate shared object (gpuindex_cuda.so, next to
 * gpuindex.so) that only the service dlopens: gpuindex.so itself never
 * links CUDA, so it loads on machines with no driver or toolkit, and CUDA
 * is initialised in the one process that uses it.
 */
#include "postgres.h"

#include <dlfcn.h>

#include "miscadmin.h"

#include "gi_service.h"
#include "host_store.h"

const gi_backend_ops *gi_ops = NULL;
char		gi_ops_unavailable[256];

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
	return GI_OK;
}

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
	if (ops->device_count() <= 0)
	{
		snprintf(why, whylen, "no CUDA device found (%s)", ops->last_error());
		return NULL;
	}
	if (ops->store_create == NULL || ops->ivf_search == NULL)
	{
		snprintf(why, whylen, "the CUDA backend in \"%s\" does not implement the store yet (device: %s)",
				 path, ops->device_name());
		return NULL;
	}
	return ops;
}

void
gi_device_init(void)
{
	char		why[256] = "";

	gi_ops = NULL;
	gi_ops_unavailable[0] = '\0';

	switch (gi_device_choice)
	{
		case GI_DEVICE_CPU:
			gi_ops = gi_host_backend();
			if (gi_debug_service_kmeans)
			{
				gi_host_ops_kmeans = *gi_ops;
				gi_host_ops_kmeans.kmeans_train = host_kmeans_train;
				gi_host_ops_kmeans.kmeans_assign = gi_host_kmeans_assign;
				gi_ops = &gi_host_ops_kmeans;
			}
			break;
		case GI_DEVICE_CUDA:
			gi_ops = load_cuda(why, sizeof(why));
			if (gi_ops == NULL)
			{
				snprintf(gi_ops_unavailable, sizeof(gi_ops_unavailable),
						 "gpuindex.device is \"cuda\" but %s", why);
				ereport(LOG, (errmsg("gpuindex device service: %s", gi_ops_unavailable)));
			}
			break;
		case GI_DEVICE_AUTO:
			gi_ops = load_cuda(why, sizeof(why));
			if (gi_ops == NULL)
			{
				ereport(LOG,
						(errmsg("gpuindex device service: using the host backend: %s", why)));
				gi_ops = gi_host_backend();
			}
			break;
	}
	if (gi_ops)
		ereport(LOG,
				(errmsg("gpuindex device service: backend \"%s\" on %s",
						gi_ops->name, gi_ops->device_name())));
}
