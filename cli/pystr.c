#include "cli/pystr.h"

#include <stdint.h>
#include <string.h>

#include "planner/json.h"

/* The code point of the n-byte UTF-8 sequence at p (checked by ck_json_utf8_length). */
static uint32_t code_point(const unsigned char *p, size_t n)
{
    static const unsigned char lead_bits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t c = p[0] & lead_bits[n];
    for (size_t k = 1; k < n; k++)
        c = c << 6 | (p[k] & 0x3f);
    return c;
}

void ck_pystr_put(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = ck_json_utf8_length(p, strnlen((const char *)p, 4));
        uint32_t c = n ? code_point(p, n) : 0xdc00u + *p;
        p += n ? n : 1;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", (char)c);
        else if (c >= 0x20 && c < 0x7f)
            fputc((char)c, out);
        else if (c < 0x100)
            fprintf(out, "\\x%02x", (unsigned)c);
        else if (c < 0x10000)
            fprintf(out, "\\u%04x", (unsigned)c);
        else
            fprintf(out, "\\U%08x", (unsigned)c);
    }
    fputc('"', out);
}
