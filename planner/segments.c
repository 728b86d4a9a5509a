#include "planner/segments.h"

int ck_schedule_segments(const ck_chain *c, const size_t *starts, size_t n, ck_schedule *out,
                         ck_err *err)
{
    size_t L = c->n_stages;
    bool ok = true;
    for (size_t k = 0; ok && k + 1 < n; k++)
        for (size_t i = starts[k]; ok && i < starts[k + 1]; i++)
            ok = ck_schedule_push(out, i == starts[k] ? CK_F_CK : CK_F_NONE, i);
    for (size_t i = starts[n - 1]; ok && i < L; i++)
        ok = ck_schedule_push(out, CK_F_ALL, i);
    ok = ok && ck_schedule_push(out, CK_LOSS, 0);
    for (size_t k = n; ok && k-- > 0;) {
        size_t end = k + 1 < n ? starts[k + 1] : L;
        for (size_t i = starts[k]; ok && k + 1 < n && i < end; i++)
            ok = ck_schedule_push(out, CK_F_ALL, i);
        for (size_t i = end; ok && i-- > starts[k];)
            ok = ck_schedule_push(out, CK_B, i);
    }
    return ok ? CK_OK : ck_fail_oom(err);
}
