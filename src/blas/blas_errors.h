/* blas_errors.h - BLAS error exits where the system BLAS would send them. */
#ifndef CDC_BLAS_ERRORS_H_INCLUDED
#define CDC_BLAS_ERRORS_H_INCLUDED

/* Fortran error exit of routine name (6 characters, blank-padded: "SGEMM ",
   "SGEMV "): the first xerbla_ in the global scope (the host's own, else
   the system BLAS's), as the reference BLAS calls it; else a message. */
void cdc__blas_xerbla(const char *name, int info);

/* CBLAS error exit of routine (e.g. "cblas_sgemv"), numbered as the
   reference CBLAS numbers it: the host's own cblas_xerbla (not a system
   BLAS's, which exits), else a message naming what and its value. */
void cdc__blas_cblas_xerbla(const char *routine, int info, const char *what, int value);

static inline int cdc__blas_max1(int v)
{
    return v > 1 ? v : 1;
}

#endif
