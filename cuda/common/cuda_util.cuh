/*
 * cuda_util.cuh
 *		Helpers shared by the CUDA backend's files: error reporting, the
 *		memory-ordering primitives of the publish protocol, ordered bit
 *		patterns for radix keys, and the comparisons every top-k uses.
 *
 * Kept header-only (inline / __device__ __forceinline__) so that each .cu
 * file compiles on its own without relocatable device code.
 */
#ifndef GI_CUDA_UTIL_CUH
#define GI_CUDA_UTIL_CUH

#include <cstdint>
#include <cuda_runtime.h>

#include "gi_backend.h"

#define GI_CU_WARP 32
#define GI_CU_FULL_MASK 0xFFFFFFFFu

/* record the message that last_error() returns (thread-local) */
extern void gi_cu_set_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/*
 * Map a CUDA error to a status: an allocation failure is GI_ERR_NOMEM
 * (and is not sticky, so the error state is cleared); anything else is
 * GI_ERR_DEVICE with CUDA's own message.
 */
extern gi_status gi_cu_status(cudaError_t err, const char *what);

/* evaluate a CUDA call; on failure set the message and return the status */
#define GI_CU_TRY(call) \
	do { \
		cudaError_t gi_cu_e_ = (call); \
		if (gi_cu_e_ != cudaSuccess) \
			return gi_cu_status(gi_cu_e_, #call); \
	} while (0)

/* ---- device side: the publish protocol -------------------------------- */

/*
 * Readers trust only the validity bit, so the bitmap (and the list links
 * leading to a slab) are read with acquire semantics at GPU scope: once a
 * bit is seen set, every payload write that preceded the writer's fence is
 * visible too, and the L1 cannot serve a stale line for it.
 */
__device__ __forceinline__ uint32_t
gi_ld_acquire(const uint32_t *p)
{
	uint32_t	v;

	asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

/* ---- ordered bit patterns ---------------------------------------------- */

/*
 * Radix sorts and radix selects want unsigned keys whose order is the
 * numeric order.  Callers first turn NaN into +Inf and -0 into +0 (the
 * host ranks NaN as +Inf and compares -0 == +0), so that equal values
 * have equal bits.
 */
__device__ __forceinline__ float
gi_rank_float(float d)
{
	if (d != d)
		return __int_as_float(0x7f800000);
	if (d == 0.0f)
		return 0.0f;
	return d;
}

__device__ __forceinline__ double
gi_rank_double(double d)
{
	if (d != d)
		return __longlong_as_double(0x7ff0000000000000LL);
	if (d == 0.0)
		return 0.0;
	return d;
}

__device__ __forceinline__ uint32_t
gi_f2ord(float f)
{
	uint32_t	u = __float_as_uint(f);

	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float
gi_ord2f(uint32_t u)
{
	return __uint_as_float((u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u);
}

__device__ __forceinline__ uint64_t
gi_d2ord(double d)
{
	uint64_t	u = (uint64_t) __double_as_longlong(d);

	return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

/* (distance, key) ascending: the order of every result list */
__device__ __forceinline__ bool
gi_hit_less(float da, uint64_t ka, float db, uint64_t kb)
{
	return da < db || (da == db && ka < kb);
}

__device__ __forceinline__ uint32_t
gi_lanemask_lt(void)
{
	uint32_t	m;

	asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
	return m;
}

static inline uint32_t
gi_cu_div_up(uint64_t a, uint64_t b)
{
	return (uint32_t) ((a + b - 1) / b);
}

#endif							/* GI_CUDA_UTIL_CUH */
