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
 * The store lives in cuda_store.cu (life cycle), cuda_insert.cu,
 * cuda_delete.cu, cuda_quantizer.cu and cuda_search.cu; this file holds
 * the ops table, the per-thread error message and the device probe.
 */
#include <cstdarg>
#include <cstdio>
#include <cuda_runtime.h>

#include "cuda_store.h"
#include "cuda_util.cuh"

static thread_local char gi_cuda_errbuf[512];
static char gi_cuda_devname[640];

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

static int
gi_cuda_device_count(void)
{
	int			n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);

	if (err != cudaSuccess)
	{
		snprintf(gi_cuda_errbuf, sizeof(gi_cuda_errbuf),
				 "cudaGetDeviceCount: %s", cudaGetErrorString(err));
		return 0;
	}
	return n;
}

static const char *
gi_cuda_device_name(void)
{
	cudaDeviceProp prop;

	if (gi_cuda_devname[0] == '\0')
	{
		if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
			snprintf(gi_cuda_devname, sizeof(gi_cuda_devname), "%s (sm_%d%d, %.0f GiB)",
					 prop.name, prop.major, prop.minor,
					 prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
		else
			snprintf(gi_cuda_devname, sizeof(gi_cuda_devname), "unknown CUDA device");
	}
	return gi_cuda_devname;
}

static const gi_backend_ops gi_cuda_ops = {
	"cuda",
	gi_cuda_last_error,
	gi_cuda_device_count,
	gi_cuda_device_name,
	gi_cu_store_create,
	gi_cu_store_destroy,
	gi_cu_store_insert,
	gi_cu_store_delete,
	gi_cu_store_stats,
	gi_cu_ivf_search,
	gi_cu_store_set_limit,
	gi_cu_kmeans_train,
	gi_cu_kmeans_assign,
	gi_cu_kmeans_release,
};

extern "C" const gi_backend_ops *
gi_cuda_backend(void)
{
	return &gi_cuda_ops;
}
