/*
 * host_topk.h
 *		The host kinds' bounded top-k: a max-heap of (distance, id)
 *		candidates ordered by distance, then id.
 */
#ifndef GI_HOST_TOPK_H
#define GI_HOST_TOPK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gi_host_cand
{
	double		dist;
	uint64_t	id;
} gi_host_cand;

/*
 * Bounded max-heap of the best candidates so far: v[0] is the worst one
 * kept, so a new candidate is compared with it once and usually rejected.
 */
typedef struct gi_host_topk
{
	gi_host_cand *v;
	uint32_t	n;
	uint32_t	cap;
} gi_host_topk;

static inline bool
gi_host_cand_less(gi_host_cand a, gi_host_cand b)
{
	return a.dist < b.dist || (a.dist == b.dist && a.id < b.id);
}

static inline void
gi_host_sift_down(gi_host_cand *v, uint32_t n, uint32_t i)
{
	for (;;)
	{
		uint32_t	l = 2 * i + 1;
		uint32_t	big = i;
		gi_host_cand t;

		if (l < n && gi_host_cand_less(v[big], v[l]))
			big = l;
		if (l + 1 < n && gi_host_cand_less(v[big], v[l + 1]))
			big = l + 1;
		if (big == i)
			return;
		t = v[i];
		v[i] = v[big];
		v[big] = t;
		i = big;
	}
}

static inline void
gi_host_topk_push(gi_host_topk *t, double dist, uint64_t id)
{
	gi_host_cand c;

	c.dist = dist;
	c.id = id;
	if (t->n < t->cap)
	{
		uint32_t	i = t->n++;

		while (i > 0)
		{
			uint32_t	parent = (i - 1) / 2;

			if (!gi_host_cand_less(t->v[parent], c))
				break;
			t->v[i] = t->v[parent];
			i = parent;
		}
		t->v[i] = c;
	}
	else if (t->cap > 0 && gi_host_cand_less(c, t->v[0]))
	{
		t->v[0] = c;
		gi_host_sift_down(t->v, t->n, 0);
	}
}

/* heap sort in place: ascending (dist, id) */
static inline void
gi_host_topk_sort(gi_host_topk *t)
{
	uint32_t	m;

	for (m = t->n; m > 1; m--)
	{
		gi_host_cand tmp = t->v[0];

		t->v[0] = t->v[m - 1];
		t->v[m - 1] = tmp;
		gi_host_sift_down(t->v, m - 1, 0);
	}
}

#endif							/* GI_HOST_TOPK_H */
