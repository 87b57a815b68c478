/* Errors in two tiers (see include/dsinfer.h): recoverable failures return a ds_status with a message
 * in an error buffer; broken invariants abort with file:line (DS_CHECK). */
#ifndef DS_CORE_STATUS_H
#define DS_CORE_STATUS_H

#include "dsinfer.h"

/* Writes the formatted message into err (DS_ERRLEN bytes; err may be NULL) and returns st. */
ds_status ds_seterr(char *err, ds_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void ds_die(const char *file, int line, const char *msg) __attribute__((noreturn));
#define DS_CHECK(cond) do { if (!(cond)) ds_die(__FILE__, __LINE__, "check failed: " #cond); } while (0)

/* Allocation that aborts on failure (for sizes that are bounded by the model, never by a request). */
void *ds_xmalloc(size_t n);
void *ds_xcalloc(size_t n, size_t size);
void *ds_xrealloc(void *p, size_t n);
char *ds_xstrdup(const char *s);

#endif
