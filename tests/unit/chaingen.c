#include "tests/unit/chaingen.h"

void ck_rng_seed(ck_rng *rng, uint64_t seed)
{
    rng->state = seed;
}

uint64_t ck_rng_below(ck_rng *rng, uint64_t n)
{
    /* splitmix64: a full-period generator with well-mixed output; the modulo bias is
     * irrelevant for test data. */
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (z ^ (z >> 31)) % n;
}

int ck_chaingen_hetero3(ck_chain *c, ck_err *err)
{
    int rc = ck_chain_alloc(c, "hetero-3", 3, err);
    if (rc != CK_OK)
        return rc;
    c->input_bytes = 1;
    c->stages[0] = (ck_stage){.fwd_time = 1, .bwd_time = 2, .out_bytes = 2, .saved_bytes = 5,
                              .fwd_tmp_bytes = 1, .bwd_tmp_bytes = 5};
    c->stages[1] = (ck_stage){.fwd_time = 5, .bwd_time = 2, .out_bytes = 1, .saved_bytes = 3};
    c->stages[2] = (ck_stage){.fwd_time = 3, .bwd_time = 2, .out_bytes = 1, .saved_bytes = 1};
    return CK_OK;
}

int ck_chaingen_uniform(ck_chain *c, size_t L, uint64_t size, ck_err *err)
{
    int rc = ck_chain_alloc(c, "uniform", L, err);
    if (rc != CK_OK)
        return rc;
    c->input_bytes = size;
    for (size_t i = 0; i < L; i++)
        c->stages[i] = (ck_stage){.fwd_time = 1, .bwd_time = 1, .out_bytes = size,
                                  .saved_bytes = size};
    return CK_OK;
}

/* A temporary: mostly small, sometimes large enough to dominate every other term. */
static uint64_t random_tmp(ck_rng *rng, uint64_t max_size)
{
    uint64_t bound = ck_rng_below(rng, 8) == 0 ? 4 * max_size : max_size;
    return ck_rng_below(rng, bound + 1);
}

static double random_time(ck_rng *rng, unsigned max_time)
{
    return (double)ck_rng_below(rng, 10 * (uint64_t)max_time + 1) / 10;
}

int ck_chaingen_random(ck_chain *c, size_t L, uint64_t max_size, unsigned max_time, ck_rng *rng,
                       ck_err *err)
{
    int rc = ck_chain_alloc(c, "random", L, err);
    if (rc != CK_OK)
        return rc;
    c->input_bytes = ck_rng_below(rng, max_size + 1);
    for (size_t i = 0; i < L; i++) {
        ck_stage *s = &c->stages[i];
        s->out_bytes = ck_rng_below(rng, max_size + 1);
        /* Often a stage keeps nothing beyond its output, as for an elementwise stage. */
        s->saved_bytes = s->out_bytes + (ck_rng_below(rng, 3) ? ck_rng_below(rng, max_size + 1) : 0);
        s->fwd_tmp_bytes = random_tmp(rng, max_size);
        s->bwd_tmp_bytes = random_tmp(rng, max_size);
        s->fwd_time = random_time(rng, max_time);
        s->bwd_time = random_time(rng, max_time);
    }
    c->loss_bwd_time = random_time(rng, max_time);
    c->loss_bwd_tmp_bytes = random_tmp(rng, max_size);
    return CK_OK;
}

int ck_chaingen_variants(ck_chain *c, uint64_t max_size, unsigned max_time, ck_rng *rng, ck_err *err)
{
    static char *const names[] = {"a", "b", "c"};
    int rc = CK_OK;
    for (size_t i = 0; i < c->n_stages && rc == CK_OK; i++) {
        const ck_stage *st = &c->stages[i];
        ck_variant v[3];
        size_t n = (size_t)ck_rng_below(rng, 4);
        for (size_t k = 0; k < n; k++)
            v[k] = (ck_variant){.name = names[k],
                                .saved_bytes = st->out_bytes +
                                               ck_rng_below(rng, st->saved_bytes - st->out_bytes + 2),
                                .fwd_tmp_bytes = ck_rng_below(rng, max_size + 1),
                                .bwd_tmp_bytes = ck_rng_below(rng, max_size + 1),
                                .bwd_time = st->bwd_time + random_time(rng, max_time)};
        rc = ck_chain_set_variants(c, i, v, n, err);
    }
    return rc;
}
