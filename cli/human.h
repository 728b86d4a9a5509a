/* human: figures as the commands print them for people. (Sizes: ck_size_format.) */
#ifndef CK_HUMAN_H
#define CK_HUMAN_H

#include <stddef.h>

/* A duration in seconds as "12.3 us", "4.56 ms" or "7.890 s". */
void ck_format_seconds(double t, char *buf, size_t len);

#endif
