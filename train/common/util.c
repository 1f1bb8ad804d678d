/* util — see util.h. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mha.h"

int util_fail(int status, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

void util_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
}

int util_read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *err,
                   size_t errlen)
{
    *out = NULL;
    *len = 0;
    char ebuf[128];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return util_fail(MHA_EIO, err, errlen, "cannot open %s: %s", path,
                         strerror_r(e, ebuf, sizeof ebuf) == 0 ? ebuf : "error");
    }
    struct stat st;
    int rc = MHA_OK;
    if (fstat(fd, &st) != 0)
        rc = util_fail(MHA_EIO, err, errlen, "cannot stat %s", path);
    else if (!S_ISREG(st.st_mode))
        rc = util_fail(MHA_EIO, err, errlen, "%s is not a regular file", path);
    else if ((uintmax_t)st.st_size > max_bytes)
        rc = util_fail(MHA_EOVERFLOW, err, errlen, "%s: %jd bytes, more than the limit of %zu",
                       path, (intmax_t)st.st_size, max_bytes);
    size_t size = rc == MHA_OK ? (size_t)st.st_size : 0, got = 0;
    char *buf = rc == MHA_OK ? malloc(size + 1) : NULL;
    if (rc == MHA_OK && buf == NULL)
        rc = util_fail(MHA_ENOMEM, err, errlen, "out of memory reading %s", path);
    while (rc == MHA_OK && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = util_fail(MHA_EIO, err, errlen, "cannot read %s: %s", path,
                           strerror_r(e, ebuf, sizeof ebuf) == 0 ? ebuf : "error");
        } else if (r == 0)
            size = got; /* the file shrank while being read: take what is there */
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc != MHA_OK) {
        free(buf);
        return rc;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return MHA_OK;
}

void util_free_all(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}
