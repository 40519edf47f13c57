/* units.c — config sizes ("64MiB", "1.5G") and durations ("30s", "10m", "1.5h") parsed
 * exactly: decimal fractions scaled in integers, overflow refused, -1 on anything else. */
#include "core/util.h"
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- sizes and durations -------------------------------------------------------- */

struct unit {
    const char *name;
    uint64_t mult;
};

/* Reads "<digits>[.<digits>]" from the front of *sp. The integer part is bounded by
 * INT64_MAX here; the scaled result is checked again later. */
static bool parse_decimal(const char **sp, uint64_t *ip, const char **frac, size_t *fraclen)
{
    const char *s = *sp;
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *frac = s;
    *fraclen = 0;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        *frac = s;
        while (*s >= '0' && *s <= '9')
            s++;
        *fraclen = (size_t)(s - *frac);
    }
    *ip = v;
    *sp = s;
    return true;
}

/* ip.frac × mult, truncated toward zero, exactly: the fractional digits are
 * multiplied by mult from the last digit up, and what carries past the decimal
 * point is floor(frac × mult). The carry stays below mult, so nothing overflows
 * however many digits there are. */
static int64_t scale_decimal(uint64_t ip, const char *frac, size_t fraclen, uint64_t mult)
{
    uint64_t carry = 0;
    for (size_t i = fraclen; i-- > 0;)
        carry = ((uint64_t)(frac[i] - '0') * mult + carry) / 10;
    if (ip > ((uint64_t)INT64_MAX - carry) / mult)
        return -1;
    return (int64_t)(ip * mult + carry);
}

/* "<number>[ ]<unit>" with a unit from the table, or a bare number scaled by
 * bare_mult. A space must be followed by a unit. */
static int64_t parse_scaled(const char *s, const struct unit *units, size_t nunits,
                            uint64_t bare_mult)
{
    if (!s)
        return -1;
    uint64_t ip;
    const char *frac;
    size_t fraclen;
    if (!parse_decimal(&s, &ip, &frac, &fraclen))
        return -1;
    if (*s == '\0')
        return scale_decimal(ip, frac, fraclen, bare_mult);
    if (*s == ' ')
        s++;
    for (size_t i = 0; i < nunits; i++)
        if (strcmp(s, units[i].name) == 0)
            return scale_decimal(ip, frac, fraclen, units[i].mult);
    return -1;
}

int64_t abx_parse_size(const char *s)
{
    static const struct unit units[] = {
        {"B", 1},
        {"KB", UINT64_C(1000)},
        {"MB", UINT64_C(1000000)},
        {"GB", UINT64_C(1000000000)},
        {"TB", UINT64_C(1000000000000)},
        {"KiB", UINT64_C(1) << 10},
        {"MiB", UINT64_C(1) << 20},
        {"GiB", UINT64_C(1) << 30},
        {"TiB", UINT64_C(1) << 40},
    };
    return parse_scaled(s, units, ABX_ARRAY_LEN(units), 1);
}

int64_t abx_parse_duration_ms(const char *s)
{
    static const struct unit units[] = {
        {"ms", 1},
        {"s", 1000},
        {"m", 60 * 1000},
        {"h", 60 * 60 * 1000},
        {"d", 24 * 60 * 60 * 1000},
    };
    return parse_scaled(s, units, ABX_ARRAY_LEN(units), 1000);
}
