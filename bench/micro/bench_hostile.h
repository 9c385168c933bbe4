/* bench_hostile.h - what hostile peers cost a worker and a coordinator (issue 9's acceptance). */
#ifndef CDC_BENCH_HOSTILE_H_INCLUDED
#define CDC_BENCH_HOSTILE_H_INCLUDED

/* `cdcgemm-bench hostile [--calls N] [--quick] [--worker PATH]`: a CURVE
   worker on tcp loopback serving an allowed coordinator (fc 2048x2048,
   batch 16) while
   (1) a stranger (no allowed key) sends 300 x 1 MB frames of a never-finished
       multipart message (raw TCP and a CURVE DEALER), 10,000 random messages
       and the padding-1000 conv: it must get no reply, the worker's RSS must
       rise by under 10 MB, the coordinator's results stay right (its p50
       beside an undisturbed run is reported);
   (2) an allowed but misbehaving peer sends the padding-1000 conv (it must
       get an ERROR naming the limit) and 200,000 WEIGHTS under distinct keys
       (the worker's RSS may grow by at most --max-memory + 10%);
   (3) a fake worker in the coordinator's plan pushes 2,000 unsolicited 1 MB
       RESULTs: the coordinator's RSS must grow by under 50 MB and every
       result stay right.
   One parsable line per phase, then a verdict; exit 0 when every bound held.
   `--fake-worker ENDPOINT` runs only the fake worker (the child process of
   phase 3). */
int cdc_bench_hostile(int argc, char **argv);

#endif
