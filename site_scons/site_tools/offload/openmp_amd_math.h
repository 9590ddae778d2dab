/* offload-tool: clang's AMD device math for an OpenMP source compiled as one job on a build server.
 *
 * Through sccache-dist an OpenMP source is compiled on a build server from its text with every
 * include inlined here (`-frewrite-includes`), as the host side reads them. clang's OpenMP math
 * wrappers (<math.h>, <cmath>) include the AMD device definitions of the math functions only
 * `#ifdef __AMDGCN__`, which the host side does not define: the inlined text leaves them out,
 * and an AMD device image made from it calls `sin` or `exp` itself, which its device link does
 * not have. The tool gives this header with `-include` to such one-job compiles for an AMD arch.
 * It includes the same headers in the same `declare variant` as the wrappers, outside that test,
 * so their text is inlined: host and NVIDIA device code skip the variant, AMD device code reads
 * it. Where clang's wrappers include them themselves (a compile made from the files, here), the
 * headers' own guards make the wrappers' second inclusion empty.
 *
 * What these headers include is included first, outside the variant: an include guard set inside
 * a variant the host skips would hide the header from the host. The order is the wrappers': in C
 * the system's <math.h>, then the AMD math functions; in C++ the math functions before <cmath>
 * (whose wrapper's AMD overloads call them; its own <math.h> would bring <cmath> first).
 *
 * The tool checks that clang's wrappers include exactly these headers for AMD before it sends
 * AMD OpenMP compiles (`dist.openmp_wrappers.amd_math_header`).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>
#ifndef __cplusplus
#include <math.h>
#endif

#ifndef __CLANG_HIP_MATH_H__
#pragma omp begin declare variant match(device = {arch(amdgcn)})
#define __OPENMP_AMDGCN__
#include <__clang_hip_math.h>
#undef __OPENMP_AMDGCN__
#pragma omp end declare variant
#endif

#ifdef __cplusplus
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#ifndef __CLANG_HIP_CMATH_H__
#pragma omp begin declare variant match(device = {arch(amdgcn)})
#pragma push_macro("__constant__")
#define __constant__ __attribute__((constant))
#define __OPENMP_AMDGCN__
#include <__clang_hip_cmath.h>
#pragma pop_macro("__constant__")
#undef __OPENMP_AMDGCN__
#pragma omp end declare variant
#endif
#endif
