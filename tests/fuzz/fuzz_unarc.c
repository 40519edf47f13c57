/* fuzz_unarc.c — the archive reader of files.extract (builtin/files/unarc.c).
 *
 * The first input byte picks the format (auto, tar, tar.gz, zip), the rest is the file,
 * handed over as a memfd. Every entry is read to its end in odd-sized chunks.
 * Invariants: the reader never hands out more data than the entry declares, names and
 * link targets are NUL-terminated within UNARC_NAME_MAX and non-empty, a failed reader
 * stays failed, and the whole run is bounded (entries and bytes by the input's size:
 * a member's data comes from the input, so a reader that loops is caught). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "builtin/files/unarc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    static const unarc_format fmts[] = {UNARC_AUTO, UNARC_TAR, UNARC_TARGZ, UNARC_ZIP};
    unarc_format f = fmts[data[0] & 3];
    int fd = memfd_create("fuzz_unarc", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size > 1 && write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
        abort();
    char why[256];
    unarc *a = unarc_open(fd, f, why, sizeof why);
    if (!a) {
        if (!why[0] || !memchr(why, '\0', sizeof why))
            abort();
        close(fd);
        return 0;
    }
    static unarc_entry e;
    static char buf[4099];
    uint64_t total = 0;
    int rc, n = 0;
    while ((rc = unarc_next(a, &e)) > 0) {
        if (!memchr(e.name, '\0', sizeof e.name) || !memchr(e.link, '\0', sizeof e.link) || !e.name[0])
            abort();
        if ((e.type == UNARC_SYMLINK || e.type == UNARC_HARDLINK) == false && e.link[0])
            abort();
        uint64_t got = 0;
        ssize_t k;
        size_t chunk = 1 + (size_t)(n % 4097);
        while ((k = unarc_read(a, buf, chunk)) > 0) {
            got += (uint64_t)k;
            if ((size_t)k > chunk || got > e.size)
                abort();
        }
        if (k == 0 && got != e.size)
            abort(); /* a clean end is the declared size */
        if (k < 0)
            break;
        total += got;
        /* deflate expands at most ~1032x; tar data is the input itself */
        if (++n > 100000 || total > (uint64_t)size * 1100 + 65536)
            abort();
    }
    if (rc < 0 || unarc_get_format(a) == UNARC_AUTO) {
        if (unarc_next(a, &e) != -1 || !unarc_error(a)[0])
            abort(); /* failed stays failed */
    }
    unarc_close(a);
    close(fd);
    return 0;
}
