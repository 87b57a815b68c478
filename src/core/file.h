/* Whole-file reads for the small text files a model folder holds (config.json, index, tokenizer). */
#ifndef DS_CORE_FILE_H
#define DS_CORE_FILE_H

#include <stddef.h>

/* Reads at most max bytes of path into a malloc'd, NUL-terminated buffer; *len (may be NULL) gets the
 * byte count. NULL (errno set) if the file cannot be opened or read, or is longer than max. */
char *ds_read_file(const char *path, size_t max, size_t *len);

#endif
