/* Released KV pages are poisoned with NaN (bytes 0xFF) in every layer, and only those: a freed sequence's
 * pages (some consecutive, some interleaved with another sequence's, so the release fills several runs),
 * not the pages still held by another sequence, and not a page with a second reference until that one is
 * dropped too. The surviving sequence then decodes to the same logits as a fresh engine fed the same
 * tokens (ds_engine_release_pages, model/engine.c). */
#include <stdlib.h>
#include <string.h>

#include "dsinfer.h"
#include "golden.h"
#include "loader/config.h"
#include "model/engine.h"
#include "testutil.h"

enum { PAGE = 4, MAX_PAGES = 64, V = 1024 };

static ds_engine *open_tiny(void) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/tiny-v3", fixtures_dir());
    ds_engine_opts o = {.n_threads = 1, .page_size = PAGE, .max_pages = MAX_PAGES};
    ds_engine *e = NULL;
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    return e;
}

static size_t page_bytes(const ds_engine *e) { return ((size_t)PAGE * ds_kv_token_bytes(&e->cfg) + 3) / 4 * 4; }

static const unsigned char *page_at(ds_engine *e, int layer, int page) {
    return (const unsigned char *)ds_engine_layer_cache(e, layer) + (size_t)page * page_bytes(e);
}

/* 1 if every byte of `page` in every layer is 0xFF */
static int poisoned(ds_engine *e, int page) {
    for (int l = 0; l < e->cfg.num_layers; l++) {
        const unsigned char *p = page_at(e, l, page);
        for (size_t i = 0; i < page_bytes(e); i++)
            if (p[i] != 0xFF) return 0;
    }
    return 1;
}

static void feed(ds_engine *e, ds_seq *s, const int32_t *ids, int n, float *logits) {
    char err[DS_ERRLEN];
    ds_batch_item it = {.seq = s, .tokens = ids, .n_tokens = n};
    CHECKF(ds_engine_forward(e, &it, 1, logits, err) == DS_OK, "%s", err);
}

int main(void) {
    char err[DS_ERRLEN];
    ds_engine *e = open_tiny();
    if (!e) return test_result("test_page_poison");
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = (i * 53) % 1000 + 2;
    float *lg = malloc(sizeof(float) * V);
    ds_seq *a, *b;
    ds_seq_new(e, &a, err);
    ds_seq_new(e, &b, err);
    feed(e, a, ids, 8, lg);        /* a: pages 0-1 */
    feed(e, b, ids + 32, 10, lg);  /* b: three pages after them */
    feed(e, a, ids + 8, 14, lg);   /* a: four more, after b's: a holds two runs */
    CHECK(a->n_pages == 6 && b->n_pages == 3);
    int a_pages[8], nb = b->n_pages;
    memcpy(a_pages, a->pages, sizeof(int) * (size_t)a->n_pages);
    /* a second reference to a's last page: it must outlive a's release */
    int kept = a_pages[5];
    ds_kv_pool_ref(e->pool, kept);
    size_t pb = page_bytes(e);
    unsigned char *b_before = malloc(pb * (size_t)nb * (size_t)e->cfg.num_layers);
    for (int l = 0; l < e->cfg.num_layers; l++)
        for (int i = 0; i < nb; i++) memcpy(b_before + ((size_t)l * nb + i) * pb, page_at(e, l, b->pages[i]), pb);
    for (int i = 0; i < 6; i++) CHECKF(!poisoned(e, a_pages[i]), "a's page %d poisoned while held", a_pages[i]);

    int free0 = ds_engine_pages_free(e);
    ds_seq_free(a);
    CHECK(ds_engine_pages_free(e) == free0 + 5);
    for (int i = 0; i < 5; i++) CHECKF(poisoned(e, a_pages[i]), "a's released page %d not NaN in every layer", a_pages[i]);
    CHECKF(!poisoned(e, kept), "page %d poisoned while a second reference holds it", kept);
    int same = 1;
    for (int l = 0; l < e->cfg.num_layers; l++)
        for (int i = 0; i < nb; i++) same &= !memcmp(b_before + ((size_t)l * nb + i) * pb, page_at(e, l, b->pages[i]), pb);
    CHECKF(same, "b's pages changed when a was released");
    ds_engine_release_page(e, kept);
    CHECKF(poisoned(e, kept), "page %d not NaN after its last reference", kept);
    CHECK(ds_engine_check_pages(e, err) == DS_OK);

    /* b decodes on as a fresh engine does with the same tokens */
    float *ref = malloc(sizeof(float) * V);
    feed(e, b, ids + 42, 1, lg);
    ds_engine *f = open_tiny();
    ds_seq *c;
    ds_seq_new(f, &c, err);
    feed(f, c, ids + 32, 10, ref);
    feed(f, c, ids + 42, 1, ref);
    diff_stats d = diff_f32(lg, ref, V);
    CHECKF(d.max_abs <= 1e-5, "b after a's release: max abs %g against a fresh engine", d.max_abs);
    ds_seq_free(c);
    ds_engine_free(f);
    ds_seq_free(b);
    CHECK(ds_engine_pages_free(e) == MAX_PAGES);
    free(b_before);
    free(ref);
    free(lg);
    ds_engine_free(e);
    return test_result("test_page_poison");
}
