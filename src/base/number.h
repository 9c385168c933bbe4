/* number.h - strict decimal numbers for the environment, the fault grammar and
   the worker's command line. strtol and strtod alone take leading blanks, a
   sign, hex and "inf" (so " -5" became 2^64 - 5 as a byte count). */
#ifndef CDC_NUMBER_H_INCLUDED
#define CDC_NUMBER_H_INCLUDED

/* The whole of text as a decimal integer in [lo, hi] into *out: a digit
   first ('-' then a digit only when lo < 0), nothing after. 0, or -1 with
   *out untouched. */
int cdc__parse_long(const char *text, long lo, long hi, long *out);

/* The whole of text as a plain finite decimal (digits, '.', an exponent; a
   digit or '.' first, no sign, no hex, no inf/nan) into *out. 0, or -1 with
   *out untouched. Range checks are the caller's. */
int cdc__parse_decimal(const char *text, double *out);

#endif
