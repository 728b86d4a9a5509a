#include "cli/human.h"

#include <string.h>

#include "planner/json.h"

void ck_human_seconds(double t, char *buf, size_t len)
{
    if (t < 1e-3)
        snprintf(buf, len, "%.1f us", t * 1e6);
    else if (t < 1)
        snprintf(buf, len, "%.2f ms", t * 1e3);
    else
        snprintf(buf, len, "%.3f s", t);
}

void ck_human_count(uint64_t n, char *buf, size_t len)
{
    char digits[24], grouped[32];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n), used = 0;
    for (int i = 0; i < nd; i++) {
        if (i && (nd - i) % 3 == 0)
            grouped[used++] = ',';
        grouped[used++] = digits[i];
    }
    grouped[used] = '\0';
    snprintf(buf, len, "%s", grouped);
}

/* The shown form of the character at s (not at its end) into piece; returns the bytes of s
 * it stands for. */
static size_t shown_piece(const unsigned char *s, char piece[8])
{
    size_t n = ck_json_utf8_length(s, strnlen((const char *)s, 4));
    if (n == 0 || (n == 1 && (s[0] < 0x20 || s[0] == 0x7f))) {
        snprintf(piece, 8, "\\x%02x", s[0]);
        return 1;
    }
    if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
        snprintf(piece, 8, "\\u%04x", s[1]);
        return 2;
    }
    if (n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
        snprintf(piece, 8, "\\u20%02x", s[2] - 0x80u);
        return 3;
    }
    memcpy(piece, s, n);
    piece[n] = '\0';
    return n;
}

void ck_human_terminal_text(const char *s, char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t used = 0;
    char piece[8];
    while (*p) {
        size_t took = shown_piece(p, piece), n = strlen(piece);
        if (used + n >= len)
            break;
        memcpy(buf + used, piece, n);
        used += n;
        p += took;
    }
    buf[used] = '\0';
}

void ck_human_put_terminal_text(FILE *out, const char *s)
{
    char piece[8];
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        p += shown_piece(p, piece);
        fputs(piece, out);
    }
}
