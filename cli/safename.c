#include "cli/safename.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "planner/json.h"
#include "planner/sha256.h"

static bool kept(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
}

void ck_safename_stem(const char *name, char stem[CK_SAFE_STEM_MAX])
{
    const unsigned char *p = (const unsigned char *)name;
    size_t used = 0;
    while (*p && used < CK_SAFE_NAME_KEPT) {
        bool keep = kept(*p) && !(used == 0 && (*p == '.' || *p == '-'));
        size_t n = kept(*p) ? 1 : ck_json_utf8_length(p, strnlen((const char *)p, 4));
        stem[used++] = keep ? (char)*p : '_';
        p += n ? n : 1;
    }
    stem[used] = '\0';
    if (used == 0)
        snprintf(stem, CK_SAFE_STEM_MAX, "unnamed");
    if (strcmp(stem, name) != 0) {
        char hex[65];
        ck_sha256_hex(name, strlen(name), hex);
        size_t len = strlen(stem);
        snprintf(stem + len, CK_SAFE_STEM_MAX - len, "-%.8s", hex);
    }
}

/* The stems taken so far, found regardless of case: an open-addressing table of indexes
 * into the stems, each with the next counter to try when another name's stem is the same. */
typedef struct {
    size_t *taken; /* index into stems, or SIZE_MAX for a free slot */
    size_t *next_counter;
    size_t mask;
    char (*stems)[CK_SAFE_STEM_MAX];
} stem_set;

static size_t hash_nocase(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s)) * 1099511628211u;
    return (size_t)h;
}

/* The slot holding `stem`, or the free slot where it would go. */
static size_t find_slot(const stem_set *set, const char *stem)
{
    size_t k = hash_nocase(stem) & set->mask;
    while (set->taken[k] != SIZE_MAX && strcasecmp(set->stems[set->taken[k]], stem) != 0)
        k = (k + 1) & set->mask;
    return k;
}

int ck_safename_distinct_stems(const char *const *names, size_t n, char (*stems)[CK_SAFE_STEM_MAX],
                      ck_err *err)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    stem_set set = {malloc(cap * sizeof *set.taken), malloc(cap * sizeof *set.next_counter),
                    cap - 1, stems};
    if (!set.taken || !set.next_counter) {
        free(set.taken);
        free(set.next_counter);
        return ck_err_oom(err);
    }
    for (size_t k = 0; k < cap; k++)
        set.taken[k] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        ck_safename_stem(names[i], stems[i]);
        size_t slot = find_slot(&set, stems[i]);
        if (set.taken[slot] != SIZE_MAX) {
            /* taken by an earlier name: the first free "-2", "-3"... (a stem is at most
             * CK_SAFE_NAME_KEPT + 9 bytes, so a counter always fits whole) */
            size_t base = slot, len = strlen(stems[i]);
            do {
                snprintf(stems[i] + len, CK_SAFE_STEM_MAX - len, "-%zu", set.next_counter[base]++);
                slot = find_slot(&set, stems[i]);
            } while (set.taken[slot] != SIZE_MAX);
        }
        set.taken[slot] = i;
        set.next_counter[slot] = 2;
    }
    free(set.taken);
    free(set.next_counter);
    return CK_OK;
}
