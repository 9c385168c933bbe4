/* demo.h - the demo: coded AlexNet layers with one shard erased per call. */
#ifndef CDC_DEMO_H_INCLUDED
#define CDC_DEMO_H_INCLUDED

int cdc_bench_demo(int argc, char **argv);

#endif
