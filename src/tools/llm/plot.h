/* plot.h - cdcgemm-llm --plot F.png: each run's inter-token latency over
 * time, a point per token, the chaos actor's kills and stops marked, drawn by
 * gnuplot (as cdcgemm-bench --plot). */
#ifndef LLM_PLOT_H_INCLUDED
#define LLM_PLOT_H_INCLUDED

#include "run_result.h"

/* The PNG of count runs at path. 0, or -1 with a message on stderr (gnuplot
   missing or failing, a file that cannot be written). */
int llm_plot(const char *path, llm_run_result_t *const *runs, int count, const char *title);

#endif
