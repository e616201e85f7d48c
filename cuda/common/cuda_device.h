/*
 * cuda_device.h
 *		One CUDA device as the backend sees it (gi_device of gi_backend.h):
 *		ordinal, name, SM count, and what the backend keeps per device (the
 *		cuBLAS handle, the k-means context).
 *
 * Every entry that touches a store or a device makes that device current
 * first (gi_cu_enter), so stores on several GPUs can be used from any
 * thread.  A NULL device means ordinal 0, through a default object opened
 * on first use and kept for the life of the process.
 */
#ifndef GI_CUDA_DEVICE_H
#define GI_CUDA_DEVICE_H

#include <cstdint>
#include <mutex>

#include "gi_backend.h"

typedef struct cublasContext *cublasHandle_t;
struct gi_cu_km;				/* cuda/kmeans: per-device k-means context */

#define GI_CU_DEVICE_MAGIC 0x67694355u

struct gi_device
{
	uint32_t	magic;			/* GI_CU_DEVICE_MAGIC while open */
	int			ordinal;
	int			sms;			/* streaming multiprocessors */
	size_t		l2_bytes;		/* L2 cache */
	char		name[640];

	std::mutex	mu;				/* guards the lazily made members below */
	cublasHandle_t cublas;
	gi_cu_km   *km;
};

/* ---- cuda_device.cu ---- */

/* the device object of params (NULL: the default one, opened on first use) */
extern gi_status gi_cu_device_resolve(gi_device *dev, gi_device **out);

/* make dev the calling thread's current device */
extern gi_status gi_cu_enter(const gi_device *dev);

/* the device's cuBLAS handle, made on first use (callers set its stream) */
extern gi_status gi_cu_cublas_handle(gi_device *dev, cublasHandle_t *out);

extern int	gi_cu_device_count(void);
extern gi_status gi_cu_device_open(int ordinal, gi_device **out);
extern void gi_cu_device_close(gi_device *dev);
extern const char *gi_cu_device_name(gi_device *dev);

/* ---- cuda/kmeans: k-means for CREATE INDEX (gi_backend.h kmeans_*) ---- */
extern gi_status gi_cu_kmeans_train(const gi_kmeans_params *params, uint32_t n,
									const float *samples, float *centroids,
									uint32_t *nproduced);
extern gi_status gi_cu_kmeans_assign(gi_device *dev, uint32_t nlists, uint32_t dim,
									 gi_metric metric, const float *centroids,
									 uint32_t n, const float *vectors,
									 uint32_t *lists);
extern void gi_cu_kmeans_release(gi_device *dev);
/* free the device's k-means context (device_close) */
extern void gi_cu_kmeans_device_free(gi_device *dev);

#endif							/* GI_CUDA_DEVICE_H */
