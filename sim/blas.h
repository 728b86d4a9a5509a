/* blas: process-wide settings of the BLAS library behind the kernels. */
#ifndef CK_BLAS_H
#define CK_BLAS_H

/* Uses n threads for matrix products (n >= 1). */
void ck_blas_set_threads(int n);
/* The number of threads matrix products use now. */
int ck_blas_threads(void);

#endif
