/* index: finding keys among many in O(log n) each: a sorted index over byte strings that the
 * caller keeps (names, or numbers laid out in an array), each known by an id, its position
 * when it was set. Sorting also puts equal keys side by side, which finds duplicates in
 * O(n log n) instead of comparing every pair. Being a sort, not a hash, it has no bad cases
 * for keys chosen to collide. */
#ifndef CK_INDEX_H
#define CK_INDEX_H

#include <stdbool.h>
#include <stddef.h>

#define CK_INDEX_NONE ((size_t)-1)

typedef struct {
    const void *key;
    size_t len, id;
} ck_index_entry;

typedef struct {
    size_t n;
    ck_index_entry *e; /* sorted by key, then id, once ck_index_sort has run */
} ck_index;

/* Room for n keys, to be set with ck_index_set, then sorted once; false when out of memory.
 * A zeroed ck_index is an empty index (ck_index_free may be called on it). */
bool ck_index_alloc(ck_index *ix, size_t n);
void ck_index_free(ck_index *ix);
/* Key number id (id < n): `len` bytes at `key`, which must outlive the index. */
void ck_index_set(ck_index *ix, size_t id, const void *key, size_t len);
void ck_index_set_name(ck_index *ix, size_t id, const char *name);
void ck_index_sort(ck_index *ix);

/* The smallest id whose key is these bytes (or this name), or CK_INDEX_NONE. */
size_t ck_index_find(const ck_index *ix, const void *key, size_t len);
size_t ck_index_find_name(const ck_index *ix, const char *name);

/* The first repeated key in order of id: the entry of the smallest id whose key an earlier
 * id has, with *first set to the earliest of those; NULL when all keys differ. */
const ck_index_entry *ck_index_first_repeat(const ck_index *ix, size_t *first);

#endif
