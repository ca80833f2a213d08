// Runtime CPU dispatch for the hand-written loops.
//
// The addon is compiled on the machine that installs it, but that image is often copied to
// another machine (containers, CI caches), so -march=native could crash there with SIGILL.
// Instead the hot loops are compiled several times and glibc picks the widest variant the CPU
// supports when the addon loads. BLAS does its own dispatch and is unaffected.
#ifndef OPENCLAW_DISPATCH_H
#define OPENCLAW_DISPATCH_H

#include <stddef.h> /* pulls in <features.h>, which defines __GLIBC__ on glibc systems */

#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIMD_CLONES
#endif

#endif
