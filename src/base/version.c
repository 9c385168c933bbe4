/* version.c - the version of the library that is running (cdc_version). */
#include "cdcgemm.h"

/* Compiled from the generated cdcgemm_version.h, so a program can tell the
   headers it was built with (CDC_VERSION_STRING) from the library it loaded. */
const char *cdc_version(void)
{
    return CDC_VERSION_STRING;
}
