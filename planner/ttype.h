/* ttype: a tensor's type (dtype and shape), its size and how messages show it. */
#ifndef CK_TTYPE_H
#define CK_TTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/dtype.h"

#define CK_MAX_RANK 4

/* A tensor's type. Rank 0 is a scalar (the losses' output). */
typedef struct {
    ck_dtype dtype;
    size_t rank;
    uint64_t dim[CK_MAX_RANK];
} ck_ttype;

/* Element count and byte size; false on overflow. */
bool ck_ttype_numel(const ck_ttype *t, uint64_t *out);
bool ck_ttype_bytes(const ck_ttype *t, uint64_t *out);
/* "f32 [4, 64, 128]" */
void ck_ttype_format(const ck_ttype *t, char *buf, size_t len);

#endif
