#include "tests/unit/chains.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_names(ck_chain *c)
{
    for (size_t i = 0; i < c->n_stages; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%zu", i);
        c->stages[i].name = strdup(name);
        ck_assert_ptr_nonnull(c->stages[i].name);
    }
}

void test_chain_hetero3(ck_chain *c)
{
    ck_assert_int_eq(ck_chain_alloc(c, "hetero-3", 3, NULL), CK_OK);
    c->input_bytes = 1;
    c->stages[0] = (ck_stage){NULL, 1, 2, 2, 5, 1, 5};
    c->stages[1] = (ck_stage){NULL, 5, 2, 1, 3, 0, 0};
    c->stages[2] = (ck_stage){NULL, 3, 2, 1, 1, 0, 0};
    set_names(c);
}

void test_chain_uniform(ck_chain *c, size_t n, uint64_t size, uint64_t extra)
{
    ck_assert_int_eq(ck_chain_alloc(c, "uniform", n, NULL), CK_OK);
    c->input_bytes = size;
    for (size_t i = 0; i < n; i++)
        c->stages[i] = (ck_stage){NULL, 1, 1, size, size + extra, 0, 0};
    set_names(c);
}

static uint64_t next_random(unsigned *seed, uint64_t bound)
{
    *seed = *seed * 1103515245u + 12345u;
    return (uint64_t)((*seed >> 8) % (unsigned)(bound + 1));
}

void test_chain_random(ck_chain *c, size_t n, unsigned *seed, uint64_t max_size)
{
    ck_assert_int_eq(ck_chain_alloc(c, "random", n, NULL), CK_OK);
    c->input_bytes = next_random(seed, max_size);
    for (size_t i = 0; i < n; i++) {
        ck_stage *s = &c->stages[i];
        s->out_bytes = next_random(seed, max_size);
        s->saved_bytes = s->out_bytes + next_random(seed, max_size);
        s->fwd_time = (double)next_random(seed, 10);
        s->bwd_time = (double)next_random(seed, 10);
        s->fwd_tmp_bytes = next_random(seed, 5) == 0 ? next_random(seed, 4 * max_size) : 0;
        s->bwd_tmp_bytes = next_random(seed, 5) == 0 ? next_random(seed, 4 * max_size) : 0;
    }
    c->loss_bwd_time = (double)next_random(seed, 3);
    c->loss_bwd_tmp_bytes = next_random(seed, 3) == 0 ? next_random(seed, max_size) : 0;
    set_names(c);
}
