/*
 * vecarray.h
 *		Validation of real[] (float4[]) vector arguments and the distance
 *		kernels shared by the SQL operators and the access methods.
 */
#ifndef GI_VECARRAY_H
#define GI_VECARRAY_H

#include "postgres.h"

#include "utils/array.h"

/* same limit as pgvector's vector type */
#define GI_MAX_DIM 16000

/*
 * Validates a real[] and returns a pointer to its float4 elements (no copy;
 * the array must be detoasted by the caller, e.g. PG_GETARG_ARRAYTYPE_P).
 * ERRORs (with errcode) on: not 1-dimensional (multi-dim), empty, NULL
 * elements, NaN or +-Inf elements, more than GI_MAX_DIM elements, and an
 * element type other than real.  `what` names the argument in messages
 * (e.g. "vector").
 */
extern const float4 *gi_array_floats(ArrayType *a, int *dim, const char *what);

/* ERROR "different vector dimensions %d and %d" (ERRCODE_DATA_EXCEPTION) */
extern void gi_check_same_dim(int a, int b);

/*
 * Pure kernels (no checks), used by the operators and by the access methods.
 * They accumulate in double.
 */
extern double gi_l2_squared(const float4 *a, const float4 *b, int dim);
extern double gi_inner_product(const float4 *a, const float4 *b, int dim);
/* 1 - cos(a, b), clamped to [0, 2]; NaN when either norm is 0, like pgvector */
extern double gi_cosine_distance(const float4 *a, const float4 *b, int dim);

#endif							/* GI_VECARRAY_H */
