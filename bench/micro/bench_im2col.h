/* bench_im2col.h - im2col throughput against GEMM time for AlexNet/VGG-16 convs. */
#ifndef CDC_BENCH_IM2COL_H_INCLUDED
#define CDC_BENCH_IM2COL_H_INCLUDED

/* `cdcgemm-bench im2col [--model alexnet|vgg16|all] [--repeat N]`: one line per
   conv layer on stdout. Returns the process exit status. */
int cdc_bench_im2col(int argc, char **argv);

#endif
