/*
 * cuda_backend.cu
 *		Entry point of gpuindex_cuda.so, the CUDA implementation of
 *		gi_backend_ops (src/store/gi_backend.h).
 *
 * The device service dlopens this module and calls gi_cuda_backend() only
 * when gpuindex.device asks for CUDA (or "auto" finds a GPU), so that
 * gpuindex.so itself never links against CUDA and loads on machines
 * without a driver.  cudart is linked statically; cuBLAS is found through
 * the rpath set at link time.
 *
 * The device store and kernels are the CUDA backend issue's work: until
 * they exist the store entries are NULL, which the service reads as "this
 * backend cannot hold stores yet" and falls back to the host backend.
 */
#include <cstdio>
#include <cuda_runtime.h>

#include "gi_backend.h"

static thread_local char gi_cuda_errbuf[256];
static char gi_cuda_devname[640];

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
	NULL,						/* store_create: CUDA backend issue */
	NULL,						/* store_destroy */
	NULL,						/* store_insert */
	NULL,						/* store_delete */
	NULL,						/* store_stats */
	NULL,						/* ivf_search */
};

extern "C" const gi_backend_ops *
gi_cuda_backend(void)
{
	return &gi_cuda_ops;
}
