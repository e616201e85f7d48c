/*
 * cuda_device.cu
 *		Device objects: count, open, close, name; the default device behind
 *		a NULL gi_device; making a device current; its cuBLAS handle.
 */
#include <cstdio>
#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_device.h"
#include "cuda_util.cuh"

/* when the SM count cannot be read: an H100 SXM's */
#define GI_CU_DEFAULT_SMS 132
#define GI_CU_DEFAULT_L2 ((size_t) 50 << 20)

static gi_device *gi_cu_default_dev;
static std::mutex gi_cu_default_mu;

int
gi_cu_device_count(void)
{
	int			n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);

	if (err != cudaSuccess)
	{
		cudaGetLastError();
		gi_cu_set_error("cudaGetDeviceCount: %s", cudaGetErrorString(err));
		return 0;
	}
	return n;
}

gi_status
gi_cu_enter(const gi_device *dev)
{
	cudaError_t err = cudaSetDevice(dev->ordinal);

	if (err != cudaSuccess)
		return gi_cu_status(err, "cudaSetDevice");
	return GI_OK;
}

static gi_status
gi_cu_device_make(int ordinal, gi_device **out)
{
	gi_device  *d;
	cudaDeviceProp prop;
	cudaError_t err;
	int			n = gi_cu_device_count();

	*out = NULL;
	if (ordinal < 0 || ordinal >= n)
	{
		if (n == 0)
			return GI_ERR_DEVICE;	/* message set by gi_cu_device_count */
		gi_cu_set_error("device_open: CUDA device %d does not exist (%d visible)",
						ordinal, n);
		return GI_ERR_INVALID;
	}
	d = new(std::nothrow) gi_device();
	if (d == NULL)
	{
		gi_cu_set_error("out of memory opening CUDA device %d", ordinal);
		return GI_ERR_NOMEM;
	}
	d->ordinal = ordinal;
	d->sms = GI_CU_DEFAULT_SMS;
	d->l2_bytes = GI_CU_DEFAULT_L2;
	err = cudaSetDevice(ordinal);
	if (err == cudaSuccess)
		err = cudaGetDeviceProperties(&prop, ordinal);
	if (err != cudaSuccess)
	{
		gi_status	st = gi_cu_status(err, "opening a CUDA device");

		delete d;
		return st;
	}
	snprintf(d->name, sizeof(d->name), "%s (sm_%d%d, %.0f GiB)", prop.name,
			 prop.major, prop.minor,
			 prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
	if (prop.multiProcessorCount > 0)
		d->sms = prop.multiProcessorCount;
	d->l2_bytes = prop.l2CacheSize > 0 ? (size_t) prop.l2CacheSize : GI_CU_DEFAULT_L2;
	d->magic = GI_CU_DEVICE_MAGIC;
	*out = d;
	return GI_OK;
}

gi_status
gi_cu_device_resolve(gi_device *dev, gi_device **out)
{
	if (dev != NULL)
	{
		if (dev->magic != GI_CU_DEVICE_MAGIC)
		{
			gi_cu_set_error("not an open CUDA device object");
			return GI_ERR_INVALID;
		}
		*out = dev;
		return GI_OK;
	}
	{
		std::lock_guard<std::mutex> guard(gi_cu_default_mu);

		if (gi_cu_default_dev == NULL)
		{
			gi_status	st = gi_cu_device_make(0, &gi_cu_default_dev);

			if (st != GI_OK)
				return st;
		}
		*out = gi_cu_default_dev;
	}
	return GI_OK;
}

gi_status
gi_cu_device_open(int ordinal, gi_device **out)
{
	if (out == NULL)
	{
		gi_cu_set_error("device_open: out must not be NULL");
		return GI_ERR_INVALID;
	}
	return gi_cu_device_make(ordinal, out);
}

/* every store of the device must be destroyed before */
void
gi_cu_device_close(gi_device *dev)
{
	if (dev == NULL || dev->magic != GI_CU_DEVICE_MAGIC || dev == gi_cu_default_dev)
		return;
	if (gi_cu_enter(dev) == GI_OK)
		cudaDeviceSynchronize();
	gi_cu_kmeans_device_free(dev);
	if (dev->cublas)
		cublasDestroy(dev->cublas);
	cudaGetLastError();
	dev->magic = 0;
	delete dev;
}

const char *
gi_cu_device_name(gi_device *dev)
{
	gi_device  *d;

	if (gi_cu_device_resolve(dev, &d) != GI_OK)
		return "unknown CUDA device";
	return d->name;
}

gi_status
gi_cu_cublas_handle(gi_device *dev, cublasHandle_t *out)
{
	std::lock_guard<std::mutex> guard(dev->mu);

	if (dev->cublas == NULL)
	{
		cublasHandle_t h = NULL;
		cublasStatus_t cs = cublasCreate(&h);

		if (cs != CUBLAS_STATUS_SUCCESS)
		{
			gi_cu_set_error("cublasCreate failed: %s", cublasGetStatusString(cs));
			return cs == CUBLAS_STATUS_ALLOC_FAILED ? GI_ERR_NOMEM : GI_ERR_DEVICE;
		}
		/* default math: DGEMM stays IEEE double (FP64 tensor cores) */
		cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
		dev->cublas = h;
	}
	*out = dev->cublas;
	return GI_OK;
}
