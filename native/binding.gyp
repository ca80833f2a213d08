# The openclaw_native addon: N-API in C over oneDNN (when installed) and the system BLAS.
# Built at install time by scripts/build-native.mjs; see that script for how a failed build is handled.
{
  "variables": {
    # 1 when oneDNN's header and library are installed (Debian: libdnnl-dev), so sgemm and
    # gemmBf16 run on it; OPENCLAW_RL_BUILD_ONEDNN=0 builds without it (to test that build).
    "onednn%": "<!(node -p \"const fs = require('fs'); const has = (dirs, file) => dirs.some((d) => fs.existsSync(d + file)); "
               "+(process.env.OPENCLAW_RL_BUILD_ONEDNN !== '0' && has(['/usr/include', '/usr/local/include'], '/oneapi/dnnl/dnnl.h') && "
               "has(['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/lib'], '/libdnnl.so'))\")"
  },
  "targets": [
    {
      "target_name": "openclaw_native",
      "sources": [
        "src/addon.c",
        "src/args.c",
        "src/blas_ops.c",
        "src/bf16.c",
        "src/bf16_ops.c",
        "src/small_k.c",
        "src/skinny.c",
        "src/gemv.c",
        "src/spin_pool.c",
        "src/int8.c",
        "src/int8_vnni.c",
        "src/onednn.c",
        "src/layer_ops.c",
        "src/memory_ops.c",
        "src/layer_kernels.c",
        "src/kernels_parallel.c",
        "src/attention.c",
        "src/attention_avx512.c",
        "src/prefill_attention.c",
        "src/sampling.c",
        "src/train_kernels.c",
        "src/train_ops.c",
        "src/thread_buffers.c",
        "src/train_attention.c",
        "src/train_attention_ops.c"
      ],
      # Pin the Node-API level so the addon loads on every Node >= 20 it was not built with.
      "defines": ["NAPI_VERSION=8"],
      # No -march=native: the hot C loops pick their instruction set at load time
      # (src/dispatch.h). No -ffast-math: softmax relies on IEEE Inf/NaN behaviour. Only two
      # of its parts: -fno-trapping-math (clang's default; nothing here reads FP exception
      # flags), which lets gcc turn the clamps in exp_f32 into vector min/max instead of giving
      # up on the loop, and -fno-math-errno (clang's default on macOS; nothing here reads
      # errno), which lets sqrtf in a loop (adamw) become a vector square root.
      # -Wno-psabi: gcc notes that 32-byte vector arguments (src/vec_math.h) have a different
      # ABI without AVX; they only pass between inlined static functions, never across the ABI.
      "cflags_c": ["-O3", "-std=gnu11", "-fno-trapping-math", "-fno-math-errno", "-Wno-psabi"],
      "conditions": [
        ["OS=='linux'", {
          # Fedora and others put OpenBLAS's cblas.h here; Debian has it on the default path.
          "include_dirs": ["/usr/include/openblas"],
          "libraries": ["-lopenblas", "-lm"]
        }],
        # oneDNN's Debian build threads with OpenMP (libgomp); the addon's own parallel loops
        # (bf16 conversion, the small-M bf16 kernel) share that runtime and its thread count.
        ["onednn==1", {
          "defines": ["OPENCLAW_ONEDNN=1"],
          "cflags_c": ["-fopenmp"],
          "libraries": ["-ldnnl", "-fopenmp"]
        }],
        ["OS=='mac'", {
          "xcode_settings": {
            "GCC_OPTIMIZATION_LEVEL": "3",
            "OTHER_CFLAGS": ["-std=gnu11", "-fno-trapping-math", "-fno-math-errno"]
          },
          "libraries": ["-framework Accelerate"]
        }]
      ]
    },
    {
      # Loaded first (src/openmp_env.c): sets OpenMP's wait policy before libgomp reads it.
      "target_name": "openclaw_openmp_env",
      "sources": ["src/openmp_env.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_c": ["-O2", "-std=gnu11"]
    }
  ]
}
