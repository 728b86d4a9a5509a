#include "cli/files.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/interrupt.h"

static const char *write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return "write";
        data += n;
        len -= (size_t)n;
    }
    return NULL;
}

static int write_in_place(const char *path, const char *data, size_t len, ck_err *err)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return ck_fail(err, CK_ERR_RUNTIME, "%s: cannot open for writing: %s", path, strerror(errno));
    const char *failed = write_all(fd, data, len);
    if (close(fd) != 0 && !failed)
        failed = "close";
    if (failed)
        return ck_fail(err, CK_ERR_RUNTIME, "%s: cannot write (%s: %s)", path, failed, strerror(errno));
    return CK_OK;
}

int ck_append_line_atomic(const char *path, const char *line, ck_err *err)
{
    FILE *f = fopen(path, "rb");
    size_t old_len = 0, cap = 0, line_len = strlen(line);
    char *buf = NULL;
    if (!f && errno != ENOENT)
        return ck_fail(err, CK_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
    if (f) {
        /* read the whole file, growing the buffer as needed */
        for (;;) {
            if (old_len == cap) {
                cap = cap ? 2 * cap : 1 << 16;
                char *grown = realloc(buf, cap + line_len + 2);
                if (!grown) {
                    free(buf);
                    fclose(f);
                    return ck_fail_oom(err);
                }
                buf = grown;
            }
            size_t got = fread(buf + old_len, 1, cap - old_len, f);
            old_len += got;
            if (got == 0)
                break;
        }
        bool failed = ferror(f);
        fclose(f);
        if (failed) {
            free(buf);
            return ck_fail(err, CK_ERR_RUNTIME, "%s: read error", path);
        }
    } else {
        buf = malloc(line_len + 2);
        if (!buf)
            return ck_fail_oom(err);
    }
    size_t len = old_len;
    if (len > 0 && buf[len - 1] != '\n')
        buf[len++] = '\n'; /* a file cut short keeps its lines apart from the new one */
    memcpy(buf + len, line, line_len);
    len += line_len;
    buf[len++] = '\n';
    int rc = ck_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

int ck_write_file_atomic(const char *path, const char *data, size_t len, ck_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return write_in_place(path, data, len, err);
    size_t tmp_len = strlen(path) + 32;
    char *tmp = malloc(tmp_len);
    if (!tmp)
        return ck_fail_oom(err);
    snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    ck_interrupt_hold(); /* from here until tmp is renamed or removed, no signal ends ckplan */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = ck_fail(err, CK_ERR_RUNTIME, "%s: cannot create: %s", tmp, strerror(errno));
        ck_interrupt_release();
        free(tmp);
        return rc;
    }
    const char *failed = write_all(fd, data, len);
    if (!failed && fsync(fd) != 0)
        failed = "fsync";
    if (close(fd) != 0 && !failed)
        failed = "close";
    if (!failed && rename(tmp, path) != 0)
        failed = "rename";
    int rc = CK_OK;
    if (failed) {
        rc = ck_fail(err, CK_ERR_RUNTIME, "%s: cannot write (%s: %s); the previous file, if any, "
                                          "is unchanged", path, failed, strerror(errno));
        unlink(tmp);
    }
    ck_interrupt_release();
    free(tmp);
    return rc;
}
