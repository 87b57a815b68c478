/* The environment's DSINFER_* settings against the names this build knows: a switch that is misspelt or was removed
 * is ignored by the code, so a run that sets it measures the defaults; dsinfer says so at start-up instead. */
#ifndef DS_CORE_ENV_CHECK_H
#define DS_CORE_ENV_CHECK_H

#include <stddef.h>
#include <stdio.h>

/* 1 if name (len bytes, no '=') is a DSINFER_* name that dsinfer, its test programs or its harness use: the names
 * that stand alone as string literals in the sources and the harness's (tools/env_names.sh, at build time), else 0. */
int ds_env_known(const char *name, size_t len);

/* The known names: count and the i-th (0 <= i < count), in strcmp order */
size_t ds_env_count(void);
const char *ds_env_name(size_t i);

/* The known name nearest to name (len bytes) within two edits (insert, delete, substitute), or NULL. */
const char *ds_env_nearest(const char *name, size_t len);

/* For each entry of env ("NAME=VALUE" strings, NULL-terminated; NULL: none) whose NAME starts with DSINFER_ and is not
 * known, writes one warning line to out naming it (and the nearest known name, if any); returns how many. */
int ds_env_warn_unknown(char *const *env, FILE *out);

#endif
