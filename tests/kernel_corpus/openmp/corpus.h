/* The OpenMP kernel corpus: what real OpenMP offload code uses, one function per feature. Each
   returns 0 when the result computed in the target region (on a GPU, or on the host when there
   is none) matches the host's own computation. */
#pragma once

#pragma omp declare target
extern float zeros[4096];               /* 16 KiB, zero-initialised device global */
extern float init_table[4096];               /* 16 KiB, initialised device global */
extern const float weights[4];          /* read-only device data */
float cross_scale(float x);             /* defined in another file (corpus_devfunc.cpp) */
#pragma omp end declare target

int check_team_shared(void);
int check_dynamic_shared(void);
int check_globals(void);
int check_templates(void);
int check_printf(void);
int check_math(void);
int check_atomics(void);
int check_cross_file(void);
int check_header_kernel_here(void);
int check_header_kernel_in_main(void);
