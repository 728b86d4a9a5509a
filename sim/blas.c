#include "sim/blas.h"

#include <cblas.h>

void ck_blas_set_threads(int n)
{
    openblas_set_num_threads(n);
}

int ck_blas_threads(void)
{
    return openblas_get_num_threads();
}
