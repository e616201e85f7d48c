/*
 * spvec.h
 *		The sparse vector type spvec: layout, limits and the helpers the
 *		operators and the gpusparse access method share.
 *
 * Text form is pgvector's sparsevec form, {index:value,...}/dim with
 * 1-based indices; inside, indices are 0-based, strictly ascending, and
 * every value is finite and non-zero (zeros are dropped on input).
 */
#ifndef GI_SPVEC_H
#define GI_SPVEC_H

#include "postgres.h"

#include "fmgr.h"

/* pgvector's sparsevec limit on the dimension */
#define SPVEC_MAX_DIM		1000000000
/* non-zeros per vector: bounded only by the varlena size */
#define SPVEC_MAX_NNZ		((int) ((MaxAllocSize - sizeof(SpVec)) / 8))

typedef struct SpVec
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		dim;			/* 1 .. SPVEC_MAX_DIM */
	int32		nnz;			/* 0 .. SPVEC_MAX_NNZ */
	int32		unused;			/* zero */
	int32		indices[FLEXIBLE_ARRAY_MEMBER];	/* nnz, 0-based, ascending */
	/* float4 values[nnz] follow the indices */
} SpVec;

#define SPVEC_SIZE(nnz)		(offsetof(SpVec, indices) + (Size) (nnz) * (sizeof(int32) + sizeof(float4)))
#define SPVEC_VALUES(v)		((float4 *) ((v)->indices + (v)->nnz))

#define DatumGetSpVecP(x)	((SpVec *) PG_DETOAST_DATUM(x))
#define PG_GETARG_SPVEC_P(n) DatumGetSpVecP(PG_GETARG_DATUM(n))
#define PG_RETURN_SPVEC_P(x) PG_RETURN_POINTER(x)

/* a zeroed vector of dim dimensions with room for nnz non-zeros */
extern SpVec *spvec_alloc(int dim, int nnz);

/*
 * The inner product in the one rounding the access method ranks by: the
 * products summed in double in index order, then rounded to float4.  The
 * operators return this value (as float8), so that an index scan and a
 * sequential scan order rows identically.
 */
extern float4 spvec_inner_product(const SpVec *a, const SpVec *b);

/* ERROR (ERRCODE_DATA_EXCEPTION) unless a and b have the same dimension */
extern void spvec_check_same_dim(const SpVec *a, const SpVec *b);

#endif							/* GI_SPVEC_H */
