#include "cli/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ck_write_file_atomic(const char *path, const char *data, size_t len, ck_err *err)
{
    size_t tmp_len = strlen(path) + 32;
    char *tmp = malloc(tmp_len);
    if (!tmp)
        return ck_fail_oom(err);
    snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = ck_fail(err, CK_ERR_RUNTIME, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    const char *p = data;
    size_t left = len;
    const char *failed = NULL;
    while (left > 0 && !failed) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            failed = "write";
        else
            p += n, left -= (size_t)n;
    }
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
    free(tmp);
    return rc;
}
