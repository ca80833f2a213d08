// The backend choice and everything that talks to oneDNN: sgemm through dnnl_sgemm, and bf16
// GEMMs on matmul primitives. Built without OPENCLAW_ONEDNN, only the BLAS side remains.
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "int8.h"

#ifdef OPENCLAW_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#endif
#ifndef __APPLE__
// OpenBLAS's own (not in a generic cblas.h); the addon links OpenBLAS explicitly.
char* openblas_get_corename(void);
#endif

// Written once by gemm_select_backend while the addon loads, read-only afterwards.
static bool use_onednn = false;

bool gemm_uses_onednn(void) { return use_onednn; }

const char* gemm_select_backend(void) {
  const char* setting = getenv("OPENCLAW_RL_GEMM");
  bool built = false;
#ifdef OPENCLAW_ONEDNN
  built = true;
#endif
  if (setting == NULL || setting[0] == '\0') {
    use_onednn = built;
  } else if (strcmp(setting, "blas") == 0) {
    use_onednn = false;
  } else if (strcmp(setting, "onednn") == 0) {
    if (!built)
      return "OPENCLAW_RL_GEMM=onednn, but the addon was built without oneDNN (apt-get install libdnnl-dev, "
             "then npm rebuild openclaw-rl)";
    use_onednn = true;
  } else {
    return "OPENCLAW_RL_GEMM must be \"onednn\", \"blas\", or unset (oneDNN when the addon has it)";
  }
  return NULL;
}

static bool set_string(napi_env env, napi_value object, const char* key, const char* value) {
  napi_value v;
  return napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &v) == napi_ok &&
         napi_set_named_property(env, object, key, v) == napi_ok;
}

napi_value gemm_info(napi_env env) {
  const char* library;
  const char* isa = "unknown";
  bool bf16_instructions = false;
#ifdef __APPLE__
  library = "accelerate";
#else
  library = "openblas";
  isa = openblas_get_corename();
#endif
#ifdef OPENCLAW_ONEDNN
  if (use_onednn) {
    library = "onednn";
    dnnl_cpu_isa_t effective = dnnl_get_effective_cpu_isa();
    isa = dnnl_cpu_isa2str(effective);
    if (strncmp(isa, "cpu_isa_", 8) == 0) isa += 8;
    // The ISA values are bit sets: AMX includes every bit of avx512_core_bf16.
    bf16_instructions = (effective & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  }
#endif
  napi_value info, flag;
  if (napi_create_object(env, &info) != napi_ok || !set_string(env, info, "gemm", library) ||
      !set_string(env, info, "isa", isa) || !set_string(env, info, "int8Dot", int8_variant_name()) ||
      napi_get_boolean(env, bf16_instructions, &flag) != napi_ok ||
      napi_set_named_property(env, info, "bf16Instructions", flag) != napi_ok || napi_object_freeze(env, info) != napi_ok)
    return NULL;
  return info;
}

#ifndef OPENCLAW_ONEDNN

void gemm_set_threads(int threads) { (void)threads; }

const char* onednn_sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
                         size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
  (void)beta, (void)c, (void)ldc;
  return "the addon was built without oneDNN";
}

Bf16Status onednn_gemm_bf16(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                            const uint16_t* a, size_t lda, const uint16_t* b, size_t ldb, float beta, float* c,
                            size_t ldc) {
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
  (void)beta, (void)c, (void)ldc;
  return BF16_UNSUPPORTED;
}

Bf16Status onednn_gemm_bf16_packed(bool trans_a, size_t m, size_t n, size_t k, float alpha, const uint16_t* a,
                                   size_t lda, const void* b, float beta, float* c, size_t ldc) {
  (void)trans_a, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)beta, (void)c, (void)ldc;
  return BF16_UNSUPPORTED;
}

size_t onednn_packed_bytes(size_t n, size_t k) {
  (void)n, (void)k;
  return 0;
}

bool onednn_pack_bf16(bool trans_b, size_t n, size_t k, const uint16_t* b, size_t ldb, void* out) {
  (void)trans_b, (void)n, (void)k, (void)b, (void)ldb, (void)out;
  return false;
}

#else

// OpenMP's thread count is per calling thread, so each worker that calls setThreads sizes only
// its own teams.
void gemm_set_threads(int threads) { omp_set_num_threads(threads); }

const char* onednn_sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
                         size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (dnnl_dim_t)m, (dnnl_dim_t)n,
                                    (dnnl_dim_t)k, alpha, a, (dnnl_dim_t)lda, b, (dnnl_dim_t)ldb, beta, c,
                                    (dnnl_dim_t)ldc);
  return status == dnnl_success ? NULL : dnnl_status2str(status);
}

// Creating a matmul primitive costs far more than a small GEMM (and oneDNN's own primitive
// cache still needs a primitive descriptor per call), so each thread keeps its last primitives,
// keyed by everything that is baked into them. A training step cycles through some 30 shapes
// per layer (the projections and their LoRA factors, attention's tiles on one thread and the
// rest on all): with 16 entries every call missed (about 40 us more per call, measured cycling
// 32 shapes of 256 x ~400 x 128); 128 leave room for both kinds.
typedef struct {
  bool trans_a, trans_b;
  size_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  // B in oneDNN's own blocked layout (onednn_pack_bf16); trans_b and ldb are then 0.
  bool packed;
  // A primitive splits its work for the threads there were when it was created and must run
  // with as many (oneDNN reads omp_get_max_threads(); train_attention.c sets it to 1 in its region).
  int threads;
} MatmulKey;

typedef struct {
  bool used, supported;
  uint64_t hash; // of key, compared first
  MatmulKey key;
  dnnl_primitive_t primitive;
  dnnl_memory_t src, weights, dst;
} MatmulEntry;

#define MATMUL_CACHE_SIZE 128

static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static void create_engine(void) { engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0); }

static __thread dnnl_stream_t stream;
static __thread MatmulEntry cache[MATMUL_CACHE_SIZE];
static __thread unsigned next_slot;

static void release(MatmulEntry* e) {
  if (e->primitive) dnnl_primitive_destroy(e->primitive);
  if (e->src) dnnl_memory_destroy(e->src);
  if (e->weights) dnnl_memory_destroy(e->weights);
  if (e->dst) dnnl_memory_destroy(e->dst);
  memset(e, 0, sizeof *e);
}

static void matrix_desc(dnnl_memory_desc_t* md, size_t rows, size_t cols, size_t ld, bool transposed,
                        dnnl_data_type_t type) {
  dnnl_dims_t dims = {(dnnl_dim_t)rows, (dnnl_dim_t)cols};
  dnnl_dims_t strides = {transposed ? 1 : (dnnl_dim_t)ld, transposed ? (dnnl_dim_t)ld : 1};
  dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides);
}

// The layout oneDNN's bf16 matmul picks for a B of k x n when left to choose (brgemm's blocks of
// 64 columns by 16 pairs of rows at the 0.6B shapes), queried on PACKED_ROWS rows of A: it did not
// depend on the rows (checked for 1 to 2,048 at every shape of the 0.6B model); a primitive that
// wants another layout for some call is refused (create_matmul) and the caller computes that call
// from the plain weights.
#define PACKED_ROWS 512

static bool packed_desc(size_t n, size_t k, dnnl_memory_desc_t* out) {
  const dnnl_dims_t a_dims = {PACKED_ROWS, (dnnl_dim_t)k}, b_dims = {(dnnl_dim_t)k, (dnnl_dim_t)n},
                    c_dims = {PACKED_ROWS, (dnnl_dim_t)n};
  dnnl_memory_desc_t a, b, c;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  const char* impl = "";
  bool ok = dnnl_memory_desc_init_by_tag(&a, 2, a_dims, dnnl_bf16, dnnl_ab) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&b, 2, b_dims, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&c, 2, c_dims, dnnl_f32, dnnl_ab) == dnnl_success &&
            dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) == dnnl_success &&
            dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
            strncmp(impl, "ref", 3) != 0;
  const dnnl_memory_desc_t* chosen = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0) : NULL;
  // Plain layouts are not worth a copy.
  ok = chosen && chosen->format_kind == dnnl_blocked && chosen->format_desc.blocking.inner_nblks > 0;
  if (ok) *out = *chosen;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return ok;
}

// Fills e->primitive and its memory objects for e->key. Returns false when oneDNN refuses or
// would run its reference (scalar) implementation, which is slower than the fallback.
static bool create_matmul(MatmulEntry* e) {
  const MatmulKey* key = &e->key;
  dnnl_memory_desc_t src_md, weights_md, dst_md, packed_md;
  matrix_desc(&src_md, key->m, key->k, key->lda, key->trans_a, dnnl_bf16);
  if (key->packed) {
    const dnnl_dims_t dims = {(dnnl_dim_t)key->k, (dnnl_dim_t)key->n};
    if (!packed_desc(key->n, key->k, &packed_md) ||
        dnnl_memory_desc_init_by_tag(&weights_md, 2, dims, dnnl_bf16, dnnl_format_tag_any) != dnnl_success)
      return false;
  } else {
    matrix_desc(&weights_md, key->k, key->n, key->ldb, key->trans_b, dnnl_bf16);
  }
  matrix_desc(&dst_md, key->m, key->n, key->ldc, false, dnnl_f32);
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t post_ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_matmul_desc_init(&desc, &src_md, &weights_md, NULL, &dst_md) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            (key->alpha == 1.f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key->alpha) == dnnl_success);
  // beta == 0 must overwrite C (NaN included), so the sum post-op is only added otherwise.
  if (ok && key->beta != 0.f)
    ok = dnnl_post_ops_create(&post_ops) == dnnl_success && dnnl_post_ops_append_sum(post_ops, key->beta) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, post_ops) == dnnl_success;
  ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success;
  const char* impl = "";
  ok = ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
       strncmp(impl, "ref", 3) != 0;
  // A packed B is only read by a primitive that wants exactly the layout it was packed in.
  if (ok && key->packed) {
    const dnnl_memory_desc_t* wanted = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    ok = wanted && dnnl_memory_desc_equal(wanted, &packed_md);
    if (ok) weights_md = packed_md;
  }
  ok = ok && dnnl_primitive_create(&e->primitive, pd) == dnnl_success &&
       dnnl_memory_create(&e->src, &src_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       dnnl_memory_create(&e->weights, &weights_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       dnnl_memory_create(&e->dst, &dst_md, engine, DNNL_MEMORY_NONE) == dnnl_success;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (post_ops) dnnl_post_ops_destroy(post_ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return ok;
}

// FNV-1a over the key's bytes (padding zeroed by the caller).
static uint64_t key_hash(const MatmulKey* key) {
  const unsigned char* p = (const unsigned char*)key;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *key; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static MatmulEntry* find_or_create(const MatmulKey* key) {
  const uint64_t hash = key_hash(key);
  for (size_t i = 0; i < MATMUL_CACHE_SIZE; i++)
    if (cache[i].used && cache[i].hash == hash && memcmp(&cache[i].key, key, sizeof *key) == 0) return &cache[i];
  MatmulEntry* e = &cache[next_slot];
  next_slot = (next_slot + 1) % MATMUL_CACHE_SIZE;
  release(e);
  e->used = true;
  e->hash = hash;
  e->key = *key;
  e->supported = create_matmul(e);
  if (!e->supported) {
    release(e);
    e->used = true; // remembered as unsupported, so the refusal is not recomputed every call
    e->hash = hash;
    e->key = *key;
  }
  return e;
}

static bool ready(void) {
  if (!use_onednn) return false;
  pthread_once(&engine_once, create_engine);
  if (engine_status != dnnl_success) return false;
  if (!stream && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
    stream = NULL;
    return false;
  }
  return true;
}

static Bf16Status run_matmul(bool trans_a, bool trans_b, bool packed, size_t m, size_t n, size_t k, float alpha,
                             const uint16_t* a, size_t lda, const void* b, size_t ldb, float beta, float* c,
                             size_t ldc) {
  if (!ready()) return BF16_UNSUPPORTED;
  MatmulKey key;
  memset(&key, 0, sizeof key); // the padding too, since keys are compared with memcmp
  key.trans_a = trans_a, key.trans_b = trans_b, key.m = m, key.n = n, key.k = k;
  key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.alpha = alpha, key.beta = beta;
  key.packed = packed;
  key.threads = omp_get_max_threads();
  MatmulEntry* e = find_or_create(&key);
  if (!e->supported) return BF16_UNSUPPORTED;
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->weights}, {DNNL_ARG_DST, e->dst}};
  bool ok = dnnl_memory_set_data_handle(e->src, (void*)a) == dnnl_success &&
            dnnl_memory_set_data_handle(e->weights, (void*)b) == dnnl_success &&
            dnnl_memory_set_data_handle(e->dst, c) == dnnl_success &&
            dnnl_primitive_execute(e->primitive, stream, 3, args) == dnnl_success &&
            dnnl_stream_wait(stream) == dnnl_success;
  return ok ? BF16_DONE : BF16_FAILED;
}

Bf16Status onednn_gemm_bf16(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                            const uint16_t* a, size_t lda, const uint16_t* b, size_t ldb, float beta, float* c,
                            size_t ldc) {
  return run_matmul(trans_a, trans_b, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

Bf16Status onednn_gemm_bf16_packed(bool trans_a, size_t m, size_t n, size_t k, float alpha, const uint16_t* a,
                                   size_t lda, const void* b, float beta, float* c, size_t ldc) {
  return run_matmul(trans_a, false, true, m, n, k, alpha, a, lda, b, 0, beta, c, ldc);
}

// Per thread, the last shapes asked about: every packed call checks its weights' length.
#define PACKED_SIZES 16
static __thread struct {
  size_t n, k, bytes;
} packed_sizes[PACKED_SIZES];
static __thread unsigned next_size;

size_t onednn_packed_bytes(size_t n, size_t k) {
  for (int i = 0; i < PACKED_SIZES; i++)
    if (packed_sizes[i].n == n && packed_sizes[i].k == k) return packed_sizes[i].bytes;
  dnnl_memory_desc_t md;
  const size_t bytes = ready() && packed_desc(n, k, &md) ? dnnl_memory_desc_get_size(&md) : 0;
  packed_sizes[next_size].n = n, packed_sizes[next_size].k = k, packed_sizes[next_size].bytes = bytes;
  next_size = (next_size + 1) % PACKED_SIZES;
  return bytes;
}

bool onednn_pack_bf16(bool trans_b, size_t n, size_t k, const uint16_t* b, size_t ldb, void* out) {
  dnnl_memory_desc_t plain_md, packed_md;
  if (!ready() || !packed_desc(n, k, &packed_md)) return false;
  matrix_desc(&plain_md, k, n, ldb, trans_b, dnnl_bf16);
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t reorder = NULL;
  dnnl_memory_t from = NULL, to = NULL;
  bool ok = dnnl_reorder_primitive_desc_create(&pd, &plain_md, engine, &packed_md, engine, NULL) == dnnl_success &&
            dnnl_primitive_create(&reorder, pd) == dnnl_success &&
            dnnl_memory_create(&from, &plain_md, engine, (void*)b) == dnnl_success &&
            dnnl_memory_create(&to, &packed_md, engine, out) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    ok = dnnl_primitive_execute(reorder, stream, 2, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  }
  if (from) dnnl_memory_destroy(from);
  if (to) dnnl_memory_destroy(to);
  if (reorder) dnnl_primitive_destroy(reorder);
  if (pd) dnnl_primitive_desc_destroy(pd);
  return ok;
}

#endif
