/* Data-parallel execution without MPI: the rank's shard (sim/shard) against planner/derive's
 * shares and units, the fixed reduction order, and whole ZeRO 0-3 steps of ranks run as
 * threads (their all-gather a barrier and a copy): each rank's tracked peak is the
 * derivation's static memory plus the one-process activation peak, and its parameters are
 * those of the one-process reference bit for bit. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "planner/derive.h"
#include "planner/schedule.h"
#include "sim/blas.h"
#include "sim/exec.h"
#include "sim/shard.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* A frozen input projection, three residual-free blocks and a layernorm head: tensors of
 * 100, 10, 140, 14, 140 and 10 elements, which 3 and 4 do not all divide. */
#define MODEL                                                                                   \
    "{'format': 'ckplan-model/1', 'name': 'r', 'dims': {'B': 3, 'C': 10, 'W': 14},"             \
    " 'training': {'optimizer': 'adam'},"                                                        \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'C']}, {'name': 'y', 'shape': ['B', 'C']}],"      \
    " 'blocks': {'layer': {'input': 'u', 'nodes': ["                                            \
    "{'name': 'up', 'op': 'linear', 'out': 'W', 'inputs': ['u']},"                              \
    " {'name': 'act', 'op': 'gelu', 'inputs': ['up']},"                                          \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'inputs': ['act']}]}},"                      \
    " 'nodes': [{'name': 'in', 'op': 'linear', 'out': 'C', 'frozen': true, 'inputs': ['x']},"   \
    " {'name': 'h', 'block': 'layer', 'repeat': 3, 'inputs': ['in']},"                          \
    " {'name': 'norm', 'op': 'layernorm', 'inputs': ['h']},"                                    \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['norm', 'y']}]}"

#define MAX_RANKS 4

/* The executor's flat layout, as sim/exec lays it out: trainable nodes first. */
static size_t *flat_offsets(const ck_model *m)
{
    size_t *off = calloc(m->n_nodes, sizeof *off), total = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < m->n_nodes; k++)
            if (m->nodes[k].trainable == (pass == 0)) {
                off[k] = total;
                total += m->nodes[k].info.n_params;
            }
    return off;
}

/* Every rank's shard: the shares are derive's, the ranks' owned elements cover each tensor
 * exactly once, and every shard position maps back to the element it holds. */
START_TEST(shards_cover_each_tensor_once)
{
    ck_model *m = fx_load(MODEL);
    size_t *off = flat_offsets(m);
    uint64_t n_params = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        n_params += m->nodes[k].info.n_params;
    for (uint64_t n = 1; n <= MAX_RANKS; n++) {
        unsigned char *seen = calloc(n_params, 1);
        for (uint64_t r = 0; r < n; r++) {
            ck_shard s;
            ck_err err = {{0}};
            ck_assert_int_eq(ck_shard_create(m, &(ck_layout){.dp = n, .zero = 3}, r, off, &s, &err), CK_OK);
            ck_static_mem st;
            ck_assert_int_eq(ck_derive_static_memory(m, &(ck_layout){.dp = n, .zero = 3}, &st, &err), CK_OK);
            ck_assert_uint_eq(s.n_shard * 4, st.params); /* f32 */
            ck_assert_uint_eq(s.n_trainable_shard * 4, st.grads);
            ck_assert_uint_eq(s.n_units, ck_derive_units(m, NULL));
            for (uint64_t at = 0; at < s.n_shard; at++) {
                uint64_t flat, back;
                if (!ck_shard_flat(&s, at, &flat))
                    continue;
                ck_assert_uint_lt(flat, n_params);
                ck_assert_uint_eq(seen[flat]++, 0);
                for (size_t t = 0; t < s.n_tensors; t++)
                    if (flat >= s.tensors[t].first && flat < s.tensors[t].first + s.tensors[t].numel) {
                        ck_assert(ck_shard_owns(&s, &s.tensors[t], flat - s.tensors[t].first, &back));
                        ck_assert_uint_eq(back, at);
                    }
            }
            ck_shard_free(&s);
        }
        for (uint64_t j = 0; j < n_params; j++)
            ck_assert_uint_eq(seen[j], 1);
        free(seen);
    }
    free(off);
    ck_model_free(m);
}
END_TEST

/* Float addition does not associate: the average adds rank 0, then 1, then 2, whatever the
 * values, and a different order would give other bits. */
START_TEST(average_adds_in_rank_order)
{
    const float v[3] = {1e8f, -1e8f, 1.0f};
    float want = ((v[0] + v[1]) + v[2]) / 3.0f, other = ((v[2] + v[0]) + v[1]) / 3.0f;
    ck_assert(want != other);
    ck_assert(ck_shard_average(v, CK_F32, 3, 1, 0) == want);
    const float strided[6] = {0, 1e8f, 0, -1e8f, 0, 1.0f}; /* element 1 of blocks of 2 */
    ck_assert(ck_shard_average(strided, CK_F32, 3, 2, 1) == want);
}
END_TEST

/* Ranks as threads. */
typedef struct {
    pthread_barrier_t barrier;
    const void *send[MAX_RANKS];
    uint64_t n;
} team;

typedef struct {
    team *t;
    uint64_t rank;
    const ck_model *m;
    const ck_chain *c;
    const size_t *first;
    const ck_schedule *s;
    unsigned zero;
    ck_step_stats stats;
    float *params;
    int rc;
    ck_err err;
} member;

static int thread_allgather(void *ctx, const void *send, uint64_t bytes, void *recv, ck_err *err)
{
    (void)err;
    member *me = ctx;
    me->t->send[me->rank] = send;
    pthread_barrier_wait(&me->t->barrier);
    for (uint64_t r = 0; r < me->t->n; r++)
        memcpy((char *)recv + r * bytes, me->t->send[r], bytes);
    pthread_barrier_wait(&me->t->barrier);
    return CK_OK;
}

static void *run_rank(void *arg)
{
    member *me = arg;
    ck_exec_dp dp = {{.dp = me->t->n, .zero = me->zero}, me->rank, {thread_allgather, me}};
    ck_exec_opts o = {.seed = 7, .dp = &dp};
    ck_exec *e = NULL;
    me->rc = ck_exec_create(me->m, me->c, me->first, &o, &e, &me->err);
    for (uint64_t k = 0; k < 2 && me->rc == CK_OK; k++)
        me->rc = ck_exec_step(e, me->s, ck_exec_step_rank(k, me->rank, me->t->n), &me->stats, NULL,
                              &me->err);
    if (me->rc == CK_OK)
        me->rc = ck_exec_whole_parameters(e, me->params, &me->err);
    ck_exec_free(e);
    return NULL;
}

/* Two steps of every rank of layout (n, zero) against the reference run of their 2n
 * microbatches. */
static void check_layout(const ck_model *m, const ck_chain *c, const size_t *first,
                         const ck_schedule *s, uint64_t n, unsigned zero)
{
    ck_err err = {{0}};
    ck_exec *ref;
    ck_step_stats one;
    ck_assert_int_eq(ck_exec_create(m, c, first, &(ck_exec_opts){.seed = 7}, &ref, &err), CK_OK);
    ck_assert_int_eq(ck_exec_step(ref, s, 0, &one, NULL, &err), CK_OK); /* its activation peak */
    ck_exec_reset(ref);
    for (uint64_t k = 0; k < 2; k++)
        ck_assert_int_eq(ck_exec_step_reference(ref, s, k, n, &err), CK_OK);
    size_t np = ck_exec_n_parameters(ref);
    float *want = calloc(np, sizeof *want);
    ck_exec_parameters(ref, want);
    ck_exec_free(ref);
    ck_static_mem st;
    ck_assert_int_eq(ck_derive_static_memory(m, &(ck_layout){.dp = n, .zero = zero}, &st, &err), CK_OK);

    team t = {.n = n};
    pthread_barrier_init(&t.barrier, NULL, (unsigned)n);
    member ranks[MAX_RANKS];
    pthread_t threads[MAX_RANKS];
    for (uint64_t r = 0; r < n; r++) {
        ranks[r] = (member){.t = &t, .rank = r, .m = m, .c = c, .first = first, .s = s, .zero = zero,
                            .params = calloc(np, sizeof(float))};
        pthread_create(&threads[r], NULL, run_rank, &ranks[r]);
    }
    for (uint64_t r = 0; r < n; r++)
        pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&t.barrier);
    for (uint64_t r = 0; r < n; r++) {
        ck_assert_msg(ranks[r].rc == CK_OK, "rank %llu: %s", (unsigned long long)r, ranks[r].err.msg);
        ck_assert_uint_eq(ranks[r].stats.static_bytes, st.total);
        ck_assert_uint_eq(ranks[r].stats.peak_bytes, st.total + one.activation_peak_bytes);
        ck_assert_msg(memcmp(ranks[r].params, want, np * sizeof *want) == 0,
                      "--dp %llu --zero %u: rank %llu's parameters differ from the reference's",
                      (unsigned long long)n, zero, (unsigned long long)r);
        free(ranks[r].params);
    }
    free(want);
}

static void check_every_layout(const char *recipe)
{
    ck_model *m = fx_load_opts(&(ck_model_opts){.recipe = recipe}, MODEL);
    ck_cost_model cm;
    ck_derive_cost_model_default(&cm);
    ck_chain c;
    size_t *first;
    ck_schedule s;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_chain(m, CK_GRAN_BLOCK, &cm, &c, &first, &err), CK_OK);
    ck_assert_int_eq(ck_schedule_baseline(&c, &s, &err), CK_OK);
    ck_blas_set_threads(1);
    for (uint64_t n = 2; n <= MAX_RANKS; n++)
        for (unsigned zero = 0; zero <= 3; zero++)
            check_layout(m, &c, first, &s, n, zero);
    ck_schedule_free(&s);
    free(first);
    ck_chain_free(&c);
    ck_model_free(m);
}

START_TEST(ranks_match_the_reference_f32)
{
    check_every_layout(NULL);
}
END_TEST

START_TEST(ranks_match_the_reference_bf16_master)
{
    check_every_layout("bf16-master");
}
END_TEST

/* The reduce-scatter buffer and the gathered tables of a tied parameter would belong to
 * another unit: refused at ZeRO-2 and 3, allowed below. */
START_TEST(tied_parameters_refused_from_zero_2)
{
    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    size_t *off = flat_offsets(m);
    ck_shard s;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_shard_create(m, &(ck_layout){.dp = 2, .zero = 1}, 0, off, &s, &err), CK_OK);
    ck_shard_free(&s);
    ck_assert_int_eq(ck_shard_create(m, &(ck_layout){.dp = 2, .zero = 2}, 0, off, &s, &err), CK_ERR_INPUT);
    fx_assert_has(err.msg, "lm_head", "tied", "ZeRO-2", NULL);
    ck_shard_free(&s);
    free(off);
    ck_model_free(m);
}
END_TEST

static Suite *shard_suite(void)
{
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("shard");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, shards_cover_each_tensor_once);
    tcase_add_test(tc, average_adds_in_rank_order);
    tcase_add_test(tc, ranks_match_the_reference_f32);
    tcase_add_test(tc, ranks_match_the_reference_bf16_master);
    tcase_add_test(tc, tied_parameters_refused_from_zero_2);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(shard_suite)
