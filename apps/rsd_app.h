/* rsd_app.h -- what the three programs (apps/rsd-serve, apps/rsd-ensure, apps/rsd-sim)
   read alike: byte sizes, durations and percent-encoded text. Pure: no I/O, no
   allocation. Not part of the library: everything is `static`, prefixed rapp_, C99.

       rapp_parse_size(s, n, max, &bytes)
           "512", "4K", "3MiB", "2gb", "1.5G", "1.5GiB", "1T", ".5M": a decimal number
           (digits, or a fraction: "1.5", ".5", "2."), then an optional K, M, G or T
           (binary: 1024, either case) with an optional "i" after it, then an optional
           B or b. A fraction is cut to whole bytes. False on an empty string, a sign,
           a blank, any other suffix, or above max.
       rapp_parse_duration(s, n, bare_seconds, max_ms, &ms)
           Go's durations: "300ms", "30s", "5m", "2h", "1h30m", "1.5s", "10us", "0": one
           or more numbers (as above), each with its unit, ns, us, ms, s, m or h; "0"
           alone is zero. With bare_seconds a number alone ("30", "1.5") is seconds.
           Cut to whole ms. False on an empty string, a sign, a number without its unit
           (without bare_seconds, or after another one: "1h30"), any other unit, or
           above max_ms.
       rapp_pct_decode(s, n, plus, out, cap)
           s[0..n) with each %XX (hex digits, either case) decoded, and '+' a blank when
           plus (a query string's value), into out, NUL-terminated. The length, or -1
           when an escape is cut short or not hex, or when it does not fit cap. */
#ifndef RSD_APP_H_INCLUDED
#define RSD_APP_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define RAPP_FN static __attribute__((unused))
#else
#define RAPP_FN static
#endif

/* A decimal number at s[*i..n): digits, then optionally '.' and more digits, with one
   digit at least; the whole part in *whole, the fraction (0 <= *frac < 1) in *frac, *i
   past it. False without a digit or with a whole part past UINT64_MAX. */
RAPP_FN bool rapp_number(const char *s, size_t n, size_t *i, uint64_t *whole, double *frac) {
    size_t k = *i;
    double scale = 1;
    bool digit = false;
    *whole = 0;
    *frac = 0;
    for (; k < n && s[k] >= '0' && s[k] <= '9'; k++, digit = true) {
        unsigned d = (unsigned)(s[k] - '0');
        if (*whole > (UINT64_MAX - d) / 10) return false;
        *whole = *whole * 10 + d;
    }
    if (k < n && s[k] == '.')
        for (k++; k < n && s[k] >= '0' && s[k] <= '9'; k++, digit = true) {
            scale /= 10;
            *frac += (s[k] - '0') * scale;
        }
    *i = k;
    return digit;
}

/* whole * mul plus frac * mul (cut to an integer) into *out; false when above max. */
RAPP_FN bool rapp_scale(uint64_t whole, double frac, uint64_t mul, uint64_t max, uint64_t *out) {
    uint64_t part = (uint64_t)(frac * (double)mul);
    if (whole > max / mul || part > max - whole * mul) return false;
    *out = whole * mul + part;
    return true;
}

RAPP_FN bool rapp_parse_size(const char *s, size_t n, uint64_t max, uint64_t *out) {
    size_t i = 0;
    uint64_t whole, mul = 1;
    double frac;
    if (!rapp_number(s, n, &i, &whole, &frac)) return false;
    if (i < n) {
        switch (s[i]) {
        case 'k': case 'K': mul = (uint64_t)1 << 10; i++; break;
        case 'm': case 'M': mul = (uint64_t)1 << 20; i++; break;
        case 'g': case 'G': mul = (uint64_t)1 << 30; i++; break;
        case 't': case 'T': mul = (uint64_t)1 << 40; i++; break;
        default: break;
        }
        if (mul > 1 && i < n && s[i] == 'i') i++;
        if (i < n && (s[i] == 'B' || s[i] == 'b')) i++;
    }
    return i == n && rapp_scale(whole, frac, mul, max, out);
}

/* The unit at s[*i..n) (its letters) in nanoseconds, *i past it; 0 when none is known. */
RAPP_FN uint64_t rapp_unit_ns(const char *s, size_t n, size_t *i) {
    static const char *const names[] = {"ns", "us", "ms", "s", "m", "h"};
    static const uint64_t ns[] = {1, 1000, 1000000, 1000000000, 60000000000u, 3600000000000u};
    size_t k = *i, u;
    while (k < n && s[k] >= 'a' && s[k] <= 'z') k++;
    for (u = 0; u < sizeof ns / sizeof ns[0]; u++)
        if (strlen(names[u]) == k - *i && !memcmp(s + *i, names[u], k - *i)) {
            *i = k;
            return ns[u];
        }
    return 0;
}

RAPP_FN bool rapp_parse_duration(const char *s, size_t n, bool bare_seconds, uint64_t max_ms, uint64_t *ms) {
    size_t i = 0;
    uint64_t total = 0, whole, unit, part;
    double frac;
    if (n == 1 && s[0] == '0') { *ms = 0; return true; }
    do {
        size_t at = i;
        if (!rapp_number(s, n, &i, &whole, &frac)) return false;
        if (i == n && at == 0 && bare_seconds) unit = 1000000000; /* a number alone: seconds */
        else if (!(unit = rapp_unit_ns(s, n, &i))) return false;
        if (!rapp_scale(whole, frac, unit, UINT64_MAX - total, &part)) return false;
        total += part;
    } while (i < n);
    if (total / 1000000 > max_ms) return false;
    *ms = total / 1000000;
    return true;
}

RAPP_FN int rapp_hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

RAPP_FN int rapp_pct_decode(const char *s, size_t n, bool plus, char *out, size_t cap) {
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+' && plus) c = ' ';
        else if (c == '%') {
            int hi = i + 2 < n ? rapp_hex(s[i + 1]) : -1, lo = i + 2 < n ? rapp_hex(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= cap) return -1;
        out[o++] = c;
    }
    if (!cap) return -1;
    out[o] = 0;
    return (int)o;
}

#endif /* RSD_APP_H_INCLUDED */
