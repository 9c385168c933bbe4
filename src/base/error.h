/* error.h - recording a failure's detail for cdc_last_error(). */
#ifndef CDC_ERROR_H_INCLUDED
#define CDC_ERROR_H_INCLUDED

#include "cdcgemm.h"

/* Record a printf-style detail for cdc_last_error() in this thread and return
   status, so a failing path reads: return cdc__fail (CDC_ELD, "lda = %lld", ...). */
int cdc__fail(int status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Fail again with status and the last failure's detail (its status text
   dropped) behind "context: ", e.g. the variable that named a bad file.
   Returns status. */
int cdc__fail_within(int status, const char *context);

#endif
