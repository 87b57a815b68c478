/* DSINFER_* environment names against the list made from the sources at build time (see env_check.h). */
#include "core/env_check.h"

#include <string.h>

/* every DSINFER_* name in the sources and the harness's (tools/env_names.sh), in strcmp order */
static const char *const known_names[] = {
#include "env_names.inc"
};
enum { N_KNOWN = sizeof known_names / sizeof known_names[0] };

static const char prefix[] = "DSINFER_";

/* strcmp of name (len bytes, not terminated) against the terminated s */
static int cmp_len(const char *name, size_t len, const char *s) {
    const int c = strncmp(name, s, len);
    return c ? c : (s[len] ? -1 : 0);
}

size_t ds_env_count(void) { return N_KNOWN; }
const char *ds_env_name(size_t i) { return i < N_KNOWN ? known_names[i] : NULL; }

int ds_env_known(const char *name, size_t len) {
    size_t lo = 0, hi = N_KNOWN;
    while (lo < hi) {   /* binary search: the list is sorted by the generator (LC_ALL=C sort) */
        const size_t mid = lo + (hi - lo) / 2;
        const int c = cmp_len(name, len, known_names[mid]);
        if (c == 0) return 1;
        if (c < 0) hi = mid; else lo = mid + 1;
    }
    return 0;
}

/* Levenshtein distance of a (la bytes) and b, capped: returns cap + 1 once every path exceeds cap */
static int edits_capped(const char *a, size_t la, const char *b, int cap) {
    const size_t lb = strlen(b);
    if (la > 63 || lb > 63) return cap + 1;   /* (names are shorter; the rows below hold 64) */
    if ((la > lb ? la - lb : lb - la) > (size_t)cap) return cap + 1;
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int row_min = cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            const int sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            if (cur[j] < row_min) row_min = cur[j];
        }
        if (row_min > cap) return cap + 1;
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb] <= cap ? prev[lb] : cap + 1;
}

const char *ds_env_nearest(const char *name, size_t len) {
    const char *best = NULL;
    int best_d = 3;   /* within two edits */
    for (int i = 0; i < N_KNOWN; i++) {
        const int d = edits_capped(name, len, known_names[i], best_d - 1);
        if (d < best_d) {
            best_d = d;
            best = known_names[i];
        }
    }
    return best;
}

int ds_env_warn_unknown(char *const *env, FILE *out) {
    int n = 0;
    for (; env && *env; env++) {
        const char *e = *env, *eq = strchr(e, '=');
        const size_t len = eq ? (size_t)(eq - e) : strlen(e);
        if (strncmp(e, prefix, sizeof prefix - 1) != 0 || ds_env_known(e, len)) continue;
        const char *near = ds_env_nearest(e, len);
        fprintf(out, "dsinfer: warning: %.*s is set, but nothing in dsinfer reads it (misspelt, or a switch since removed)",
                (int)len, e);
        if (near) fprintf(out, "; did you mean %s?", near);
        fputc('\n', out);
        n++;
    }
    return n;
}
