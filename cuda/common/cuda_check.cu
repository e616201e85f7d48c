/*
 * cuda_check.cu
 *		Test hooks: invariant check of the mirror and of the device against
 *		it (key ordinals included), read-back of a list from the device,
 *		concurrent mode switch.
 *
 * O(size of the store) and full of small copies: for tests only.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_store.h"
#include "cuda_util.cuh"
#include "gi_cuda_test.h"

#define GI_CK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (err && errlen) \
				snprintf(err, errlen, __VA_ARGS__); \
			return false; \
		} \
	} while (0)

/* the pairs against the key map, with the check's own memory freed */
static bool
gi_cu_check_pairs(const gi_store *s, char *err, size_t errlen)
{
	gi_pairs_check c;
	char		msg[256];
	bool		ok = gi_pairs_check_begin(&c, &s->pairs, s->rows, msg, sizeof(msg));
	uint64_t	i;

	for (i = 0; ok && i < s->map_cap; i++)
		if (s->map[i].row1 != 0)
			ok = gi_pairs_check_key(&c, &s->pairs, s->map[i].key, s->map[i].row1 - 1,
									s->row_next, gi_cu_row_list, s, msg, sizeof(msg));
	if (ok)
		ok = gi_pairs_check_end(&c, &s->pairs, msg, sizeof(msg));
	gi_pairs_check_free(&c);
	if (!ok && err && errlen)
		snprintf(err, errlen, "%s", msg);
	return ok;
}

static bool
gi_cu_download(void *dst, const void *src, size_t bytes)
{
	if (bytes == 0)
		return true;
	return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

static bool
gi_cu_check_impl(gi_store *s, char *err, size_t errlen)
{
	uint64_t	nslots = (uint64_t) s->nslabs * GI_SLAB_RECORDS;
	std::vector<uint8_t> slab_seen(s->nslabs + 1, 0);
	std::vector<uint8_t> row_seen(s->row_hwm + 1, 0);
	std::vector<uint64_t> row_key(s->row_hwm + 1, 0);
	std::vector<uint32_t> row_kid(s->row_hwm + 1, GI_NIL);
	std::vector<uint8_t> kid_seen(s->kid_hwm + 1, 0);
	std::vector<uint64_t> dkid_key(s->kid_hwm + 1, 0);
	std::vector<uint32_t> dlists(2 * (size_t) s->params.nlists);
	std::vector<gi_dslab> dslabs(s->nslabs);
	std::vector<uint32_t> datt(nslots);
	std::vector<uint32_t> loc_row(nslots, GI_NIL);
	std::vector<uint32_t> dfree(s->nslabs);
	/* a slab's keys (u64) and key ordinals (u32) */
	std::vector<uint64_t> block(GI_SLAB_RECORDS + GI_SLAB_RECORDS / 2);
	uint64_t	linked = 0;
	uint64_t	count_sum = 0;
	uint64_t	live_rows = 0;
	uint64_t	chained = 0;
	uint64_t	map_used = 0;
	uint64_t	i;
	uint32_t	l;

	GI_CK(cudaDeviceSynchronize() == cudaSuccess, "device error before the check");
	GI_CK(!s->broken, "store is marked broken");
	GI_CK(s->slab_hwm <= s->nslabs, "slab_hwm %u > nslabs %u", s->slab_hwm, s->nslabs);
	GI_CK(s->row_hwm <= nslots, "row_hwm %u over slot capacity", s->row_hwm);
	GI_CK((uint64_t) s->nfree + s->npending <= s->slab_hwm, "free stacks too deep");
	GI_CK(s->nfree_rows <= s->row_hwm, "free row stack too deep");
	GI_CK(s->ndirty_slabs == 0 && s->ndirty_lists == 0 && s->free_low == s->nfree,
		  "patches left unapplied");

	GI_CK(gi_cu_download(dlists.data(), s->d_lists, dlists.size() * sizeof(uint32_t)) &&
		  gi_cu_download(dslabs.data(), s->d_slabs, dslabs.size() * sizeof(gi_dslab)) &&
		  gi_cu_download(datt.data(), s->d_att, datt.size() * sizeof(uint32_t)) &&
		  gi_cu_download(dfree.data(), s->d_free, dfree.size() * sizeof(uint32_t)),
		  "download of the device structures failed");

	/* lists: chains, back links, ownership, counts vs bitmaps, list rows */
	for (l = 0; l < s->params.nlists; l++)
	{
		uint32_t	prev = GI_NIL;
		uint32_t	slab;
		uint64_t	lrows = 0;

		GI_CK(dlists[2 * (size_t) l] == s->list_head[l],
			  "list %u: device head %u, mirror %u", l, dlists[2 * (size_t) l], s->list_head[l]);
		for (slab = s->list_head[l]; slab != GI_NIL; slab = s->slabs[slab].next)
		{
			const gi_mslab *h;

			GI_CK(slab < s->slab_hwm, "list %u links slab %u beyond hwm %u", l, slab, s->slab_hwm);
			GI_CK(!slab_seen[slab], "slab %u reached twice (list %u)", slab, l);
			slab_seen[slab] = 1;
			h = &s->slabs[slab];
			GI_CK(h->list == l, "slab %u in list %u says list %u", slab, l, h->list);
			GI_CK(h->prev == prev, "slab %u prev %u, expected %u", slab, h->prev, prev);
			GI_CK(h->count > 0, "empty slab %u still linked in list %u", slab, l);
			GI_CK((uint32_t) __builtin_popcount(h->bitmap) == h->count,
				  "slab %u count %u but bitmap %08x", slab, h->count, h->bitmap);
			GI_CK((h->bitmap & h->held) == 0, "slab %u: a slot is live and held", slab);
			GI_CK(dslabs[slab].next == h->next && dslabs[slab].prev == h->prev &&
				  dslabs[slab].list == h->list,
				  "slab %u: device links %u/%u/%u, mirror %u/%u/%u", slab,
				  dslabs[slab].next, dslabs[slab].prev, dslabs[slab].list,
				  h->next, h->prev, h->list);
			linked++;
			count_sum += h->count;
			lrows += h->count;
			prev = slab;
		}
		GI_CK(lrows == s->list_rows[l], "list %u holds %llu rows, list_rows says %u", l,
			  (unsigned long long) lrows, s->list_rows[l]);
		GI_CK(dlists[2 * (size_t) l + 1] == s->list_rows[l],
			  "list %u: device rows %u, mirror %u", l, dlists[2 * (size_t) l + 1],
			  s->list_rows[l]);
	}
	GI_CK(linked == s->slabs_used, "slabs_used %llu but %llu linked",
		  (unsigned long long) s->slabs_used, (unsigned long long) linked);
	GI_CK(count_sum == s->rows, "counts sum to %llu, rows %llu",
		  (unsigned long long) count_sum, (unsigned long long) s->rows);

	/* free stack and pending slabs: empty and unlinked */
	for (i = 0; i < (uint64_t) s->nfree + s->npending; i++)
	{
		uint32_t	slab = i < s->nfree ? s->free_slabs[i] : s->pending[i - s->nfree];
		const gi_mslab *h;

		GI_CK(slab < s->slab_hwm, "free slab %u beyond hwm", slab);
		GI_CK(!slab_seen[slab], "free slab %u also linked or pushed twice", slab);
		slab_seen[slab] = 2;
		h = &s->slabs[slab];
		GI_CK(h->count == 0 && h->bitmap == 0 && h->list == GI_NIL && h->prev == GI_NIL,
			  "free slab %u not blank (count %u list %u)", slab, h->count, h->list);
		GI_CK(dslabs[slab].list == GI_NIL && dslabs[slab].prev == GI_NIL,
			  "free slab %u: device list %u prev %u", slab, dslabs[slab].list,
			  dslabs[slab].prev);
		if (i < s->nfree)
			GI_CK(dfree[i] == slab, "device free stack[%llu] = %u, mirror %u",
				  (unsigned long long) i, dfree[i], slab);
	}
	for (i = 0; i < s->nslabs; i++)
	{
		const gi_mslab *h = &s->slabs[i];

		if (i < s->slab_hwm)
			GI_CK(slab_seen[i], "slab %llu is lost (neither linked nor free)",
				  (unsigned long long) i);
		else
			GI_CK(h->count == 0 && h->bitmap == 0 && h->list == GI_NIL &&
				  dslabs[i].list == GI_NIL && dslabs[i].next == GI_NIL,
				  "never-used slab %llu is not blank", (unsigned long long) i);
		GI_CK(dslabs[i].count == h->count && dslabs[i].bitmap == h->bitmap,
			  "slab %llu: device count %u bitmap %08x, mirror %u %08x",
			  (unsigned long long) i, dslabs[i].count, dslabs[i].bitmap, h->count, h->bitmap);
		GI_CK(dslabs[i].data != NULL, "slab %llu has no data block", (unsigned long long) i);
	}

	/* ATT: device == mirror everywhere; live rows point at set bits */
	for (i = 0; i < nslots; i++)
		GI_CK(datt[i] == s->att[i], "row %llu: device ATT %x, mirror %x",
			  (unsigned long long) i, datt[i], s->att[i]);
	for (i = 0; i < s->row_hwm; i++)
	{
		uint32_t	a = s->att[i];
		uint32_t	slab;
		uint32_t	slot;

		if (a == GI_CU_ATT_NONE)
			continue;
		slab = GI_CU_LOC_SLAB(a);
		slot = GI_CU_LOC_SLOT(a);
		GI_CK(slab < s->slab_hwm &&
			  (s->slabs[slab].bitmap >> slot & 1) && slab_seen[slab] == 1,
			  "live row %llu: bad ATT %x", (unsigned long long) i, a);
		GI_CK(loc_row[a] == GI_NIL, "rows %u and %llu share slab %u slot %u",
			  loc_row[a], (unsigned long long) i, slab, slot);
		loc_row[a] = (uint32_t) i;
		row_seen[i] = 1;
		live_rows++;
	}
	GI_CK(live_rows == s->rows, "%llu rows with ATT entries, rows %llu",
		  (unsigned long long) live_rows, (unsigned long long) s->rows);
	for (i = s->row_hwm; i < nslots; i++)
		GI_CK(s->att[i] == GI_CU_ATT_NONE, "row %llu beyond hwm has an ATT entry",
			  (unsigned long long) i);
	for (i = 0; i < s->nfree_rows; i++)
	{
		uint32_t	row = s->free_rows[i];

		GI_CK(row < s->row_hwm, "free row %u beyond hwm", row);
		GI_CK(row_seen[row] == 0, "free row %u is live or pushed twice", row);
		row_seen[row] = 2;
	}
	for (i = 0; i < s->row_hwm; i++)
		GI_CK(row_seen[i], "row %llu is lost (neither live nor free)", (unsigned long long) i);

	/* key map: findable entries, chains of live rows */
	for (i = 0; i < s->map_cap; i++)
	{
		uint64_t	key;
		uint32_t	row;

		if (s->map[i].row1 == 0)
			continue;
		map_used++;
		key = s->map[i].key;
		GI_CK(gi_cu_map_find(s, key) == i, "key %llu at map slot %llu is not found there",
			  (unsigned long long) key, (unsigned long long) i);
		GI_CK(s->map[i].kid < s->kid_hwm && !kid_seen[s->map[i].kid],
			  "key %llu has ordinal %u (high-water mark %u), or shares it",
			  (unsigned long long) key, s->map[i].kid, s->kid_hwm);
		kid_seen[s->map[i].kid] = 1;
		for (row = s->map[i].row1 - 1; row != GI_NIL; row = s->row_next[row])
		{
			GI_CK(row < s->row_hwm && row_seen[row] == 1,
				  "key %llu chains to row %u that is not live", (unsigned long long) key, row);
			row_seen[row] = 3;
			row_key[row] = key;
			row_kid[row] = s->map[i].kid;
			chained++;
		}
	}

	/*
	 * Key ordinals: live keys and the free and held stacks hold each
	 * ordinal below the high-water mark exactly once; the device maps a
	 * live key's ordinal back to the key.
	 */
	GI_CK(s->kid_hwm <= s->kid_cap && s->kid_hwm <= s->d_kid_cap &&
		  s->d_kid_cap >= gi_cu_kid_cap(s->map_cap) && s->kid_cap >= gi_cu_kid_cap(s->map_cap),
		  "ordinal arrays too small: high-water mark %u, host %llu, device %llu, map %llu",
		  s->kid_hwm, (unsigned long long) s->kid_cap, (unsigned long long) s->d_kid_cap,
		  (unsigned long long) s->map_cap);
	for (i = 0; i < (uint64_t) s->nfree_kids + s->nheld_kids; i++)
	{
		uint32_t	kid = i < s->nfree_kids ? s->free_kids[i] : s->held_kids[i - s->nfree_kids];

		GI_CK(kid < s->kid_hwm && !kid_seen[kid], "free ordinal %u is live, pushed twice or beyond %u",
			  kid, s->kid_hwm);
		kid_seen[kid] = 2;
	}
	GI_CK((uint64_t) s->nfree_kids + s->nheld_kids + s->map_count == s->kid_hwm,
		  "%llu live keys, %u free and %u held ordinals, high-water mark %u",
		  (unsigned long long) s->map_count, s->nfree_kids, s->nheld_kids, s->kid_hwm);
	GI_CK(s->concurrent || s->nheld_kids == 0, "ordinals held outside concurrent mode");
	GI_CK(gi_cu_download(dkid_key.data(), s->d_kid_key, (size_t) s->kid_hwm * sizeof(uint64_t)),
		  "download of the ordinal -> key array failed");
	for (i = 0; i < s->map_cap; i++)
		if (s->map[i].row1 != 0)
			GI_CK(dkid_key[s->map[i].kid] == s->map[i].key,
				  "ordinal %u maps to key %llu on the device, its key is %llu", s->map[i].kid,
				  (unsigned long long) dkid_key[s->map[i].kid],
				  (unsigned long long) s->map[i].key);
	GI_CK(map_used == s->map_count, "map holds %llu keys, count says %llu",
		  (unsigned long long) map_used, (unsigned long long) s->map_count);
	GI_CK(chained == s->rows, "key chains reach %llu rows of %llu",
		  (unsigned long long) chained, (unsigned long long) s->rows);

	/* GI_KEYS_PER_LIST's pairs (gi_pairset.h); every other mode keeps none */
	if (s->params.key_mode == GI_KEYS_PER_LIST)
	{
		if (!gi_cu_check_pairs(s, err, errlen))
			return false;
	}
	else
		GI_CK(s->pairs.run.count == 0 && s->pairs.kept.count == 0 &&
			  s->pairs.kept.cap == 0, "pairs kept without GI_KEYS_PER_LIST");

	/* per-slot keys and ordinals on the device: those of the row living there */
	for (i = 0; i < s->slab_hwm; i++)
	{
		uint32_t	bits = s->slabs[i].bitmap;
		const uint64_t *keys = block.data();
		const uint32_t *kids = (const uint32_t *) (keys + GI_SLAB_RECORDS);

		if (bits == 0)
			continue;
		GI_CK(gi_cu_download(block.data(),
							 (const char *) dslabs[i].data + (size_t) GI_SLAB_RECORDS * s->params.record_bytes,
							 block.size() * sizeof(uint64_t)),
			  "download of slab %llu failed", (unsigned long long) i);
		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);
			uint32_t	row = loc_row[GI_CU_LOC(i, slot)];

			bits &= bits - 1;
			GI_CK(row < s->row_hwm && s->att[row] == GI_CU_LOC(i, slot),
				  "slab %llu slot %u: live but no row maps there",
				  (unsigned long long) i, slot);
			GI_CK(keys[slot] == row_key[row], "slab %llu slot %u: device key %llu, expected %llu",
				  (unsigned long long) i, slot, (unsigned long long) keys[slot],
				  (unsigned long long) row_key[row]);
			GI_CK(kids[slot] == row_kid[row], "slab %llu slot %u: device key ordinal %u, expected %u",
				  (unsigned long long) i, slot, kids[slot], row_kid[row]);
		}
	}
	return true;
}

extern "C" bool
gi_cuda_store_check(gi_store *s, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (s == NULL)
	{
		if (err && errlen)
			snprintf(err, errlen, "no store");
		return false;
	}
	if (gi_cu_enter(s->dev) != GI_OK)
	{
		if (err && errlen)
			snprintf(err, errlen, "check: the store's device cannot be made current");
		return false;
	}
	try
	{
		return gi_cu_check_impl(s, err, errlen);
	}
	catch (...)
	{
		if (err && errlen)
			snprintf(err, errlen, "check: out of memory");
		return false;
	}
}

extern "C" gi_status
gi_cuda_store_dump(gi_store *s, uint32_t list, uint64_t **keys_out,
				   void **payloads_out, uint64_t *n_out)
{
	std::vector<uint64_t> keys;
	std::vector<uint32_t> pay;
	std::vector<uint32_t> block;
	uint32_t	head;
	uint32_t	slab;
	uint32_t	W;
	uint64_t	steps = 0;

	*keys_out = NULL;
	*payloads_out = NULL;
	*n_out = 0;
	if (s == NULL || list >= s->params.nlists)
	{
		gi_cu_set_error("dump: bad store or list");
		return GI_ERR_INVALID;
	}
	W = s->words;
	block.resize(s->slab_bytes / 4);
	{
		gi_status	st = gi_cu_enter(s->dev);

		if (st != GI_OK)
			return st;
	}
	GI_CU_TRY(cudaDeviceSynchronize());
	GI_CU_TRY(cudaMemcpy(&head, s->d_lists + 2 * (size_t) list, sizeof(uint32_t),
						 cudaMemcpyDeviceToHost));
	/* follow the device's own links and bitmaps */
	for (slab = head; slab != GI_NIL;)
	{
		gi_dslab	h;
		uint32_t	bits;
		const uint64_t *bkeys;

		if (slab >= s->nslabs || ++steps > s->nslabs)
		{
			gi_cu_set_error("dump: device chain of list %u is broken at slab %u", list, slab);
			return GI_ERR_DEVICE;
		}
		GI_CU_TRY(cudaMemcpy(&h, s->d_slabs + slab, sizeof(h), cudaMemcpyDeviceToHost));
		GI_CU_TRY(cudaMemcpy(block.data(), h.data, s->slab_bytes, cudaMemcpyDeviceToHost));
		bkeys = (const uint64_t *) (block.data() + (size_t) GI_SLAB_RECORDS * W);
		bits = h.bitmap;
		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);
			uint32_t	j;

			bits &= bits - 1;
			keys.push_back(bkeys[slot]);
			for (j = 0; j < W; j++)
				pay.push_back(block[(size_t) j * GI_SLAB_RECORDS + slot]);
		}
		slab = h.next;
	}
	if (!keys.empty())
	{
		*keys_out = (uint64_t *) malloc(keys.size() * sizeof(uint64_t));
		*payloads_out = malloc(pay.size() * sizeof(uint32_t));
		if (*keys_out == NULL || *payloads_out == NULL)
		{
			free(*keys_out);
			free(*payloads_out);
			*keys_out = NULL;
			*payloads_out = NULL;
			gi_cu_set_error("dump: out of memory");
			return GI_ERR_NOMEM;
		}
		memcpy(*keys_out, keys.data(), keys.size() * sizeof(uint64_t));
		memcpy(*payloads_out, pay.data(), pay.size() * sizeof(uint32_t));
	}
	*n_out = keys.size();
	return GI_OK;
}

extern "C" gi_status
gi_cuda_store_set_concurrent(gi_store *s, bool on)
{
	if (s == NULL)
	{
		gi_cu_set_error("set_concurrent: no store");
		return GI_ERR_INVALID;
	}
	if (on)
	{
		s->concurrent = true;
		return GI_OK;
	}
	s->concurrent = false;
	{
		gi_status	st = gi_cu_enter(s->dev);

		if (st != GI_OK)
			return st;
	}
	return gi_cu_quiesce(s);
}

extern "C" gi_status
gi_cuda_store_set_timing(gi_store *s, bool on)
{
	if (s == NULL)
	{
		gi_cu_set_error("set_timing: no store");
		return GI_ERR_INVALID;
	}
	if (on && s->ev0 == NULL)
	{
		gi_status	st = gi_cu_enter(s->dev);

		if (st != GI_OK)
			return st;
		GI_CU_TRY(cudaEventCreate(&s->ev0));
		GI_CU_TRY(cudaEventCreate(&s->ev1));
	}
	s->timing = on;
	return GI_OK;
}

extern "C" double
gi_cuda_store_last_device_ms(gi_store *s)
{
	return s ? s->dev_ms : 0.0;
}

static int
gi_cu_dbl_cmp(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

extern "C" gi_status
gi_cuda_bandwidth(size_t bytes, double *d2d, double *h2d_pageable, double *h2d_pinned)
{
	void	   *a = NULL;
	void	   *b = NULL;
	void	   *hp = NULL;
	void	   *hu = NULL;
	cudaEvent_t e0 = NULL;
	cudaEvent_t e1 = NULL;
	double		t[3][7];
	gi_device  *dev;
	gi_status	st = GI_OK;
	int			kind;
	int			i;

	/* the default device */
	st = gi_cu_device_resolve(NULL, &dev);
	if (st == GI_OK)
		st = gi_cu_enter(dev);
	if (st != GI_OK)
		return st;
	if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
		cudaMallocHost(&hp, bytes) != cudaSuccess || (hu = malloc(bytes)) == NULL ||
		cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
	{
		cudaGetLastError();
		gi_cu_set_error("bandwidth: allocation of %zu bytes failed", bytes);
		st = GI_ERR_NOMEM;
		goto out;
	}
	memset(hu, 1, bytes);
	memset(hp, 1, bytes);
	cudaMemset(a, 1, bytes);
	for (kind = 0; kind < 3; kind++)
	{
		for (i = -1; i < 7; i++)
		{
			float		ms = 0.0f;

			cudaEventRecord(e0, 0);
			if (kind == 0)
				cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
			else
				cudaMemcpyAsync(b, kind == 1 ? hu : hp, bytes, cudaMemcpyHostToDevice, 0);
			cudaEventRecord(e1, 0);
			cudaEventSynchronize(e1);
			cudaEventElapsedTime(&ms, e0, e1);
			if (i >= 0)
				t[kind][i] = ms;
		}
		qsort(t[kind], 7, sizeof(double), gi_cu_dbl_cmp);
	}
	if (cudaGetLastError() != cudaSuccess)
	{
		gi_cu_set_error("bandwidth: a copy failed");
		st = GI_ERR_DEVICE;
		goto out;
	}
	if (d2d)
		*d2d = 2.0 * bytes / (t[0][3] * 1e-3) / 1e9;
	if (h2d_pageable)
		*h2d_pageable = bytes / (t[1][3] * 1e-3) / 1e9;
	if (h2d_pinned)
		*h2d_pinned = bytes / (t[2][3] * 1e-3) / 1e9;
out:
	if (a)
		cudaFree(a);
	if (b)
		cudaFree(b);
	if (hp)
		cudaFreeHost(hp);
	free(hu);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return st;
}

extern "C" gi_status
gi_cuda_store_set_insert_chunk(gi_store *s, uint32_t records)
{
	if (s == NULL)
	{
		gi_cu_set_error("set_insert_chunk: no store");
		return GI_ERR_INVALID;
	}
	s->insert_chunk = records;
	return GI_OK;
}

extern "C" gi_status
gi_cuda_store_profile(gi_store *s, double *out, uint32_t nout, bool reset)
{
	double		v[GI_CUDA_PROFILE_N];
	uint32_t	i;

	if (s == NULL)
	{
		gi_cu_set_error("profile: no store");
		return GI_ERR_INVALID;
	}
	v[0] = s->prof.plan_ns * 1e-6;
	v[1] = s->prof.copy_ns * 1e-6;
	v[2] = s->prof.ship_ns * 1e-6;
	v[3] = s->prof.wait_ns * 1e-6;
	v[4] = s->prof.grow_ns * 1e-6;
	v[5] = s->prof.map_ns * 1e-6;
	v[6] = s->prof.del_plan_ns * 1e-6;
	v[7] = s->prof.del_dev_ns * 1e-6;
	v[8] = (double) s->prof.ngrow;
	v[9] = (double) s->prof.nmap;
	v[10] = (double) s->prof.nchunks;
	v[11] = (double) gi_cu_device_bytes(s);
	v[12] = s->prof.grow_dev_ns * 1e-6;
	for (i = 0; out != NULL && i < nout && i < GI_CUDA_PROFILE_N; i++)
		out[i] = v[i];
	if (reset)
		memset(&s->prof, 0, sizeof(s->prof));
	return GI_OK;
}

extern "C" void
gi_cuda_set_copy_threads(int n)
{
	gi_cu_copy_set_threads(n);
}
