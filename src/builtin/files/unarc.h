/* unarc.h — the archive reader of files.extract: tar (ustar, pax, GNU long names),
 * tar.gz (any gzip stream, concatenated members too) and zip (stored and deflate, no
 * ZIP64, no encryption), read from a file descriptor. It only parses: it never opens,
 * creates or names a file, and hands out each entry's name and link target exactly as
 * the archive holds them (minus a directory's trailing '/'). Whether a name or target is
 * safe to create is extract.c's rule, not the reader's.
 *
 * Every size the archive declares is checked against the bytes there are: a zip's
 * central directory and local headers must lie inside the file, a member's data must
 * inflate to exactly its declared size with its CRC-32, a tar member's data must be
 * there in full. Names and targets hold no NUL and fit UNARC_NAME_MAX. Memory is
 * bounded: the reader holds one entry and two 64 KiB buffers. */
#ifndef ABX_BUILTIN_FILES_UNARC_H
#define ABX_BUILTIN_FILES_UNARC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UNARC_NAME_MAX 4096 /* bytes of a name or link target, NUL included */

typedef enum unarc_format { UNARC_AUTO, UNARC_TAR, UNARC_TARGZ, UNARC_ZIP } unarc_format;
typedef enum unarc_type { UNARC_FILE, UNARC_DIR, UNARC_SYMLINK, UNARC_HARDLINK, UNARC_OTHER } unarc_type;

typedef struct unarc_entry {
    char name[UNARC_NAME_MAX];
    char link[UNARC_NAME_MAX]; /* symlink or hardlink target; "" otherwise */
    unarc_type type;
    uint64_t size;             /* data bytes (a file's contents) */
    unsigned mode;             /* permission bits the archive gives (0 when none) */
} unarc_entry;

typedef struct unarc unarc;

/* The format of fd by its first bytes (UNARC_AUTO: not one of them). */
unarc_format unarc_sniff(int fd);
const char *unarc_format_name(unarc_format f);
/* Start reading fd (borrowed; read with pread, from offset 0) as format f (AUTO: sniffed).
 * NULL on failure, with the reason in why. */
unarc *unarc_open(int fd, unarc_format f, char *why, size_t whylen);
unarc_format unarc_get_format(const unarc *a);
/* The next entry: 1 (e set), 0 at the end, -1 malformed (unarc_error says why). The
 * data of the entry before, if not read, is skipped. */
int unarc_next(unarc *a, unarc_entry *e);
/* Up to n bytes of the current entry's data: > 0, 0 at its end, -1 malformed. */
ssize_t unarc_read(unarc *a, void *buf, size_t n);
const char *unarc_error(const unarc *a);
void unarc_close(unarc *a);

#endif
