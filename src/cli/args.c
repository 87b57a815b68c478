/* Small argument helpers shared by the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/status.h"

int ds_cli_exit_code(ds_status st) {
    switch (st) {
    case DS_OK: return 0;
    case DS_ERR_ARG: return 2;
    case DS_ERR_IO: return 3;
    case DS_ERR_FORMAT: return 4;
    case DS_ERR_UNSUPPORTED: return 5;
    case DS_ERR_NOMEM: return 6;
    case DS_ERR_BACKEND: return 7;
    }
    return 1;
}

int ds_cli_parse_ids(const char *s, int32_t **ids, int *n) {
    int cap = 16;
    *n = 0;
    *ids = ds_xmalloc(sizeof(int32_t) * (size_t)cap);
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "dsinfer: --ids: bad token id list \"%s\" (expected comma-separated non-negative integers)\n", s);
            free(*ids);
            *ids = NULL;
            return -1;
        }
        if (*n == cap) *ids = ds_xrealloc(*ids, sizeof(int32_t) * (size_t)(cap *= 2));
        (*ids)[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) {
        fprintf(stderr, "dsinfer: --ids: empty token id list\n");
        free(*ids);
        *ids = NULL;
        return -1;
    }
    return 0;
}
