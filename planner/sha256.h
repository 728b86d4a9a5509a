/* sha256: the SHA-256 digest (FIPS 180-4) of a byte buffer, for a plan's record of which
 * model file it was made from. */
#ifndef CK_SHA256_H
#define CK_SHA256_H

#include <stddef.h>

/* Writes the digest of data[0..len) as 64 lowercase hex digits and a NUL into hex. */
void ck_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
