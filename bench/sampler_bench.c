/* Host sampling cost at the DeepSeek-V3 vocabulary (129,280 ids): temperature 0.7, top-p 0.95, 100 draws.
 * Build and run (bench/RESULTS.md):
 *   make build/libdsinfer.a && cc -O2 -Iinclude bench/sampler_bench.c build/libdsinfer.a \
 *     -fopenmp -lcjson -lpcre2-8 -lmicrohttpd -lm -o build/sampler_bench && build/sampler_bench */
#include "dsinfer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(void){ int V=129280; float *l=malloc(4*V),*w=malloc(4*V); srand(1);
 for(int i=0;i<V;i++) l[i]=(float)rand()/RAND_MAX*8 + (i<50?10:0);
 ds_sampling_params p; ds_sampling_defaults(&p); p.temperature=0.7f; p.top_p=0.95f; char err[512]; ds_sampler*s; ds_sampler_new(&p,V,&s,err);
 struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a); long acc=0;
 for(int t=0;t<100;t++){ memcpy(w,l,4*V); acc+=ds_sampler_sample(s,w);} clock_gettime(CLOCK_MONOTONIC,&b);
 printf("%.3f ms per sample (%ld)\n", ((b.tv_sec-a.tv_sec)*1e3+(b.tv_nsec-a.tv_nsec)/1e6)/100, acc); return 0;}
