/* banned.h — C library functions abx's sources may not call, after git's banned.h.
 * The build force-includes this file before every source of the library and the binary
 * (-include in CMakeLists.txt), so a call to one of these is a compile error on the day
 * it is written: "sorry_strcpy_is_a_banned_function" names the culprit.
 *
 * Why each is out, and what to use instead:
 *   strcpy, strcat, sprintf, vsprintf, gets: no bound on the destination. Use snprintf,
 *     abx_buf, abx_asprintf, or memcpy with a length you checked.
 *   strncpy, strncat: bounded but silently unterminated (strncpy) or bounded by the wrong
 *     length (strncat's n is what is left, a classic off-by-one). Use snprintf.
 *   strtok: one hidden static cursor shared by every thread of the server. strtok_r is
 *     allowed: its cursor is the caller's.
 *   asctime, ctime, gmtime, localtime: static result buffers, not thread-safe. Use the
 *     _r forms (abx_iso8601 for timestamps).
 *   tmpnam, tempnam, mktemp: the name can be taken between choosing and opening it. Use
 *     mkstemp or O_EXCL.
 *
 * The system headers that declare them come first, so their declarations are read before
 * the names become macros (a function-like macro would otherwise rewrite the prototype). */
#ifndef ABX_CORE_BANNED_H
#define ABX_CORE_BANNED_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ABX_BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) ABX_BANNED(strcpy)
#undef strcat
#define strcat(x, y) ABX_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) ABX_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) ABX_BANNED(strncat)
#undef strtok
#define strtok(x, y) ABX_BANNED(strtok)

#undef sprintf
#undef vsprintf
#define sprintf(...) ABX_BANNED(sprintf)
#define vsprintf(...) ABX_BANNED(vsprintf)
#undef gets
#define gets(x) ABX_BANNED(gets)

#undef asctime
#define asctime(t) ABX_BANNED(asctime)
#undef ctime
#define ctime(t) ABX_BANNED(ctime)
#undef gmtime
#define gmtime(t) ABX_BANNED(gmtime)
#undef localtime
#define localtime(t) ABX_BANNED(localtime)

#undef tmpnam
#define tmpnam(x) ABX_BANNED(tmpnam)
#undef tempnam
#define tempnam(x, y) ABX_BANNED(tempnam)
#undef mktemp
#define mktemp(x) ABX_BANNED(mktemp)

#endif
