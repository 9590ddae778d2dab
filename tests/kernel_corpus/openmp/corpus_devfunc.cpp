/* A declare-target function defined here and called from a target region in another file. */
#pragma omp declare target
float cross_scale(float x) { return 2.0f * x + 1.0f; }
#pragma omp end declare target
