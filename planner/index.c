#include "planner/index.h"

#include <stdlib.h>
#include <string.h>

bool ck_index_alloc(ck_index *ix, size_t n)
{
    ix->e = calloc(n ? n : 1, sizeof *ix->e);
    ix->n = ix->e ? n : 0;
    return ix->e != NULL;
}

void ck_index_free(ck_index *ix)
{
    free(ix->e);
    ix->e = NULL;
    ix->n = 0;
}

void ck_index_set(ck_index *ix, size_t id, const void *key, size_t len)
{
    ix->e[id] = (ck_index_entry){key, len, id};
}

void ck_index_set_name(ck_index *ix, size_t id, const char *name)
{
    ck_index_set(ix, id, name, strlen(name));
}

/* Shorter keys first, then by bytes: any total order will do. */
static int compare_keys(const void *a, size_t alen, const void *b, size_t blen)
{
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return memcmp(a, b, alen);
}

static bool same_key(const ck_index_entry *a, const ck_index_entry *b)
{
    return compare_keys(a->key, a->len, b->key, b->len) == 0;
}

static int compare_entries(const void *pa, const void *pb)
{
    const ck_index_entry *a = pa, *b = pb;
    int c = compare_keys(a->key, a->len, b->key, b->len);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

void ck_index_sort(ck_index *ix)
{
    if (ix->n > 1)
        qsort(ix->e, ix->n, sizeof *ix->e, compare_entries);
}

size_t ck_index_find(const ck_index *ix, const void *key, size_t len)
{
    /* the first entry not below the key: among equal keys, the one of smallest id */
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_keys(ix->e[mid].key, ix->e[mid].len, key, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ix->n && compare_keys(ix->e[lo].key, ix->e[lo].len, key, len) == 0)
        return ix->e[lo].id;
    return CK_INDEX_NONE;
}

size_t ck_index_find_name(const ck_index *ix, const char *name)
{
    return ck_index_find(ix, name, strlen(name));
}

const ck_index_entry *ck_index_first_repeat(const ck_index *ix, size_t *first)
{
    const ck_index_entry *again = NULL;
    for (size_t i = 1; i < ix->n; i++) {
        const ck_index_entry *a = &ix->e[i - 1], *b = &ix->e[i];
        /* a run of equal keys is in order of id: its second entry is its first repeat */
        bool run_starts = i == 1 || !same_key(&ix->e[i - 2], a);
        if (run_starts && same_key(a, b) && (!again || b->id < again->id)) {
            *first = a->id;
            again = b;
        }
    }
    return again;
}
