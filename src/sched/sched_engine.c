/* sched_kv over the engine's public page API (include/dsinfer.h): the scheduler's view of a real
 * engine. ctx is the ds_engine; sequences are ds_seq. */
#include "core/status.h"
#include "sched/sched.h"

static int e_page_size(void *c) { return ds_engine_page_size(c); }
static int e_pages_total(void *c) { return ds_engine_pages_total(c); }
static int e_pages_free(void *c) { return ds_engine_pages_free(c); }
static void e_page_ref(void *c, int p) { ds_engine_page_ref(c, p); }
static void e_page_unref(void *c, int p) { ds_engine_page_unref(c, p); }
static int e_page_refcount(void *c, int p) { return ds_engine_page_refcount(c, p); }
static void e_seq_free(void *c, void *s) { (void)c; ds_seq_free(s); }
static int e_seq_len(void *c, void *s) { (void)c; return ds_seq_len(s); }
static int e_seq_n_pages(void *c, void *s) { (void)c; return ds_seq_n_pages(s); }
static int e_seq_page(void *c, void *s, int i) { (void)c; return ds_seq_page(s, i); }

static void *e_seq_new(void *c) {
    ds_seq *s = NULL;
    char err[DS_ERRLEN];
    DS_CHECK(ds_seq_new(c, &s, err) == DS_OK);
    return s;
}

static int e_seq_adopt(void *c, void *s, const int *pages, int n) {
    (void)c;
    char err[DS_ERRLEN];
    return ds_seq_adopt_prefix(s, pages, n, err) == DS_OK ? 0 : -1;
}

sched_kv sched_kv_engine(ds_engine *eng) {
    return (sched_kv){.ctx = eng, .page_size = e_page_size, .pages_total = e_pages_total, .pages_free = e_pages_free,
                      .page_ref = e_page_ref, .page_unref = e_page_unref, .page_refcount = e_page_refcount,
                      .seq_new = e_seq_new, .seq_free = e_seq_free, .seq_len = e_seq_len,
                      .seq_n_pages = e_seq_n_pages, .seq_page = e_seq_page, .seq_adopt = e_seq_adopt};
}
