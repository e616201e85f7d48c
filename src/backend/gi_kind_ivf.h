/*
 * gi_kind_ivf.h
 *		The IVF kind as the compute backends see it: records are float
 *		vectors, lists are the cells of a coarse quantizer.
 *
 * State (set_state, once per store): a gi_ivf_state header followed by
 * the nlists * dim centroids, row-major.  Search parameters: a
 * gi_ivf_search_params.  Queries: nq * dim floats, row-major.  For each
 * query the `probes` lists with the nearest centroids are scanned and the
 * k nearest records under the metric are returned.
 */
#ifndef GI_KIND_IVF_H
#define GI_KIND_IVF_H

#include "gi_backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

typedef struct gi_ivf_state
{
	uint32_t	dim;			/* floats per record; record_bytes == dim * 4 */
	uint32_t	metric;			/* gi_metric */
	uint32_t	nlists;			/* == the store's nlists */
	uint32_t	pad;
	/* float centroids[nlists * dim] follow */
} gi_ivf_state;

typedef struct gi_ivf_search_params
{
	uint32_t	dim;			/* floats per query, == the state's dim */
	uint32_t	probes;			/* lists scanned per query, >= 1 */
} gi_ivf_search_params;

static inline size_t
gi_ivf_state_size(uint32_t nlists, uint32_t dim)
{
	return sizeof(gi_ivf_state) + (size_t) nlists * dim * sizeof(float);
}

static inline const float *
gi_ivf_state_centroids(const gi_ivf_state *state)
{
	return (const float *) (state + 1);
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_KIND_IVF_H */
