/* dtype: the element types of tensors, their names and sizes. */
#ifndef CK_DTYPE_H
#define CK_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

/* I64 holds indices that PyTorch keeps as int64 (moe's routing); no op reads it as input. */
typedef enum { CK_F32, CK_BF16, CK_F16, CK_I32, CK_U8, CK_I64 } ck_dtype;

/* "f32", "bf16", "f16", "int32", "u8", "int64". */
const char *ck_dtype_name(ck_dtype d);
bool ck_dtype_parse(const char *name, ck_dtype *out);
uint64_t ck_dtype_bytes(ck_dtype d);
bool ck_dtype_is_float(ck_dtype d);

#endif
