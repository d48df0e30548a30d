#include "bench/bench.h"
int scen_scale_in(bx_ctx *x) { (void)x; return 0; }
int scen_restart(bx_ctx *x) { (void)x; return 0; }
int scen_memory(bx_ctx *x) { (void)x; return 0; }
