// A separate, dependency-free addon that native.ts loads just before openclaw_native, in
// whichever thread loads the kernels first. libgomp (oneDNN's OpenMP runtime) reads its
// environment once, when openclaw_native pulls it in, and spins idle threads by default: on 2
// busy cores that held a 1x1024x2048 sgemm at 8 ms instead of 0.14 ms. So the wait policy
// becomes passive unless the user chose one. It is set here, in C, because a worker thread's
// process.env is a copy that never reaches the C environment.
#include <node_api.h>
#include <stdlib.h>

NAPI_MODULE_INIT() {
  if (getenv("OMP_WAIT_POLICY") == NULL && getenv("GOMP_SPINCOUNT") == NULL) setenv("OMP_WAIT_POLICY", "passive", 0);
  return exports;
}
