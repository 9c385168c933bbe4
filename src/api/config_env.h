/* config_env.h - internals of config.c shared with its tests: known CDCGEMM_* names. */
#ifndef CDC_CONFIG_ENV_H_INCLUDED
#define CDC_CONFIG_ENV_H_INCLUDED

/* The known CDCGEMM_* variable closest to name by edit distance (insert,
   delete, substitute or swap two neighbours: one edit each), or NULL when
   none is within half the length of the name's part after the prefix. name
   need not be known itself. The result is a static string. Thread-safe. */
const char *cdc__config_closest_variable(const char *name);

/* 1 when name is a variable the library (or cdcgemm-worker's spawner) reads. */
int cdc__config_variable_known(const char *name);

#endif
