/* The plot of `dsinfer bench` rows (issue 7: "CSV output and a plot"): the CSV that `dsinfer bench --csv`
 * appends to, drawn as one self-contained SVG file (no scripts, nothing fetched).
 *
 * Two panels: decode rows (kind "decode") as the achieved fraction of the roofline against the batch size, one
 * line per (label, dtype, context length); prefill rows (kind "prefill") as the fraction against the prompt
 * length, one line per (label, dtype). Both x axes are log2; y runs 0 .. 100%. Every point carries a tooltip
 * (<title>) with its tokens/s and fraction. Rows of other kinds are left out.
 *
 * The CSV needs a header naming at least the columns label, kind, dtype, batch, len, tok_s and roof_frac (a
 * fraction, 0 .. 1), in any order; every data line has the header's number of fields. */
#ifndef DS_CORE_BENCH_PLOT_H
#define DS_CORE_BENCH_PLOT_H

#include "core/status.h"

/* Reads csv_path and writes svg_path. Errors (DS_ERR_IO for files, DS_ERR_FORMAT for contents) name the file,
 * and for a bad line its number and what is wrong with it; no SVG is written then. */
ds_status ds_bench_plot(const char *csv_path, const char *svg_path, char *err);

#endif
