/*
 * cuda_backend.cu
 *		Entry point of gpuindex_cuda.so, the CUDA implementation of
 *		gi_backend_ops (src/backend/gi_backend.h).
 *
 * The device service dlopens this module and calls gi_cuda_backend() only
 * when gpuindex.device asks for CUDA (or "auto" finds a GPU), so that
 * gpuindex.so itself never links against CUDA and loads on machines
 * without a driver.  cudart is linked statically; cuBLAS is found through
 * the rpath set at link time.
 *
 * The devices are in cuda_device.cu, the store in cuda_store.cu (life
 * cycle), cuda_insert.cu and cuda_delete.cu, the kinds in cuda/<kind>/,
 * k-means in cuda/kmeans/; this file holds the ops table and the
 * per-thread error message.
 */
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* the kinds, one entry each (cuda/<kind>/) */
extern const gi_kind_ops gi_cu_ivf_kind;
extern const gi_kind_ops gi_cu_ivfpq_kind;
extern const gi_kind_ops gi_cu_sparse_kind;

static thread_local char gi_cuda_errbuf[512];

void
gi_cu_set_error(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(gi_cuda_errbuf, sizeof(gi_cuda_errbuf), fmt, ap);
	va_end(ap);
}

gi_status
gi_cu_status(cudaError_t err, const char *what)
{
	/* an allocation failure is not sticky: clear it so later calls work */
	cudaGetLastError();
	if (err == cudaErrorMemoryAllocation)
	{
		gi_cu_set_error("%s: out of device memory (%s)", what,
						cudaGetErrorString(err));
		return GI_ERR_NOMEM;
	}
	gi_cu_set_error("%s: CUDA error %d: %s", what, (int) err,
					cudaGetErrorString(err));
	return GI_ERR_DEVICE;
}

static const char *
gi_cuda_last_error(void)
{
	return gi_cuda_errbuf;
}

static gi_backend_ops
gi_cuda_make_ops(void)
{
	gi_backend_ops o;

	memset(&o, 0, sizeof(o));
	o.name = "cuda";
	o.last_error = gi_cuda_last_error;
	o.device_count = gi_cu_device_count;
	o.device_open = gi_cu_device_open;
	o.device_close = gi_cu_device_close;
	o.device_name = gi_cu_device_name;
	o.store_create = gi_cu_store_create;
	o.store_destroy = gi_cu_store_destroy;
	o.store_insert = gi_cu_store_insert;
	o.store_delete = gi_cu_store_delete;
	o.store_stats = gi_cu_store_stats;
	o.store_set_limit = gi_cu_store_set_limit;
	o.kinds[GI_KIND_IVF] = &gi_cu_ivf_kind;
	o.kinds[GI_KIND_SPARSE] = &gi_cu_sparse_kind;
	o.kinds[GI_KIND_IVFPQ] = &gi_cu_ivfpq_kind;
	o.kmeans_train = gi_cu_kmeans_train;
	o.kmeans_assign = gi_cu_kmeans_assign;
	o.kmeans_release = gi_cu_kmeans_release;
	return o;
}

extern "C" const gi_backend_ops *
gi_cuda_backend(void)
{
	static const gi_backend_ops ops = gi_cuda_make_ops();

	return &ops;
}
