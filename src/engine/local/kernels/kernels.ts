// The compute kernels the local engine needs, as one narrow interface with two implementations:
// `native` (the N-API addon over the system BLAS, see native/) and `portable` (plain TypeScript,
// also the oracle the native kernels are tested against).
//
// Conventions: every matrix is row-major float32; sizes are in elements; an output argument
// comes first; callers pass subarray views, so no offsets. All kernels are synchronous: call
// them from a worker thread, never from the event loop of the HTTP server.

/** What computes the GEMMs, for reports (`generate --json`, the serve banner, benchmarks). */
export interface KernelInfo {
  /** The library behind sgemm: oneDNN, else the system BLAS, else the TypeScript loops. */
  readonly gemm: 'onednn' | 'openblas' | 'accelerate' | 'typescript';
  /**
   * The instruction set the GEMM library chose at load time: oneDNN's name (e.g. avx512_core_bf16),
   * OpenBLAS's core name (e.g. Haswell), or 'unknown'.
   */
  readonly isa: string;
  /** Whether gemmBf16 runs on bf16 instructions (AVX512-BF16, AMX); otherwise it is emulated in fp32. */
  readonly bf16Instructions: boolean;
  /**
   * gemmInt8's variant, picked at load from the CPU's flags: 'vnni' (AVX512-VNNI: the activations
   * are quantized too) or one that dequantizes the weights against fp32 activations ('avx512',
   * 'avx2', 'generic' C, 'typescript'). OPENCLAW_RL_INT8_DOT=avx512|avx2|generic caps it per call.
   */
  readonly int8Dot: 'vnni' | 'avx512' | 'avx2' | 'generic' | 'typescript';
}

export interface Kernels {
  /** 'native' when the BLAS addon is loaded, 'portable' for the TypeScript fallback. */
  readonly name: 'native' | 'portable';

  readonly info: KernelInfo;

  /** C[M,N] = alpha * op(A) * op(B) + beta * C. op(A) is [M,K], op(B) is [K,N]. */
  sgemm(
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    lda: number,
    B: Float32Array,
    ldb: number,
    beta: number,
    C: Float32Array,
    ldc: number,
  ): void;

  /**
   * C[M,N] = alpha * op(A) * op(B) + beta * C as GPUs compute in bf16: every element of A and B
   * is rounded to bf16 (ties to even), the products are summed in fp32. A Float32Array operand is
   * rounded on the fly; a Uint16Array operand holds bf16 bits already (see toBf16).
   */
  gemmBf16(
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array | Uint16Array,
    lda: number,
    B: Float32Array | Uint16Array,
    ldb: number,
    beta: number,
    C: Float32Array,
    ldc: number,
  ): void;

  /**
   * op(B) (K x N; B holds bf16 bits, stored N x K when transB) copied into oneDNN's own layout for
   * gemmBf16Packed, or null where oneDNN would keep it plain. Native kernels built with oneDNN only.
   */
  packBf16?(transB: boolean, N: number, K: number, B: Uint16Array, ldb: number): Uint16Array | null;

  /**
   * C[M,N] = alpha * op(A) * B + beta * C as gemmBf16 computes it (the same values), with B packed
   * by packBf16 for this N and K. Returns false, C untouched, where this call's product wants another
   * layout: the caller then computes it with gemmBf16 on the plain weights.
   */
  gemmBf16Packed?(
    transA: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array | Uint16Array,
    lda: number,
    P: Uint16Array,
    beta: number,
    C: Float32Array,
    ldc: number,
  ): boolean;

  /** out[i] = the bf16 bits nearest to x[i] (ties to even; NaN stays NaN), for i < n. */
  toBf16(out: Uint16Array, x: Float32Array, n: number): void;

  /**
   * Asks the OS to back x with transparent huge pages from its first write on (Linux; native
   * kernels only); whether the advice was taken. For large buffers before their first use.
   */
  adviseHugePages?(x: Float32Array): boolean;

  /**
   * Quantizes w [N,K] (K a multiple of 32, else a RangeError) to int8 for gemmInt8: per block of
   * 32 along K, scales[b] = max|w| / 127 (fp32) and q = w / scale rounded to nearest, ties to even.
   * q holds N*K values, scales N*K/32.
   */
  quantizeInt8(q: Int8Array, scales: Float32Array, w: Float32Array, N: number, K: number): void;

  /**
   * out[i] = the bf16 bits of scales[i / 32] * q[i] (the float32 product, rounded as toBf16
   * rounds), for i < n, a multiple of 32: quantizeInt8's values back, for the products that read
   * a cache of int8 rows through bf16 GEMMs.
   */
  dequantizeInt8Bf16(out: Uint16Array, q: Int8Array, scales: Float32Array, n: number): void;

  /**
   * y[M,N] = x[M,K] . W^T, W [N,K] given as quantizeInt8's q and scales. All contiguous. Meant for
   * decode rows (small M). With int8Dot 'vnni' each row of x is quantized as quantizeInt8 does
   * (per block of 32, its own scales) and y = sum over blocks of xScale * scale * (qx . q), the dot
   * products exact in int32 (kernels/int8.ts, gemmInt8QuantizedActivations); otherwise W is
   * dequantized on the fly: sum over blocks of scale * (x . q), in fp32.
   */
  gemmInt8(M: number, N: number, K: number, x: Float32Array, q: Int8Array, scales: Float32Array, y: Float32Array): void;

  /** y = alpha * op(A) * x + beta * y, with A stored [M,N]; op(A) = A ([M,N]) or A^T ([N,M]). */
  sgemv(
    trans: boolean,
    M: number,
    N: number,
    alpha: number,
    A: Float32Array,
    lda: number,
    x: Float32Array,
    beta: number,
    y: Float32Array,
  ): void;

  /**
   * out[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * weight, for `rows` rows of `dim`. out may alias
   * x. A Uint16Array out receives bf16 bits: the float32 result rounded as toBf16 rounds it.
   */
  rmsnorm(
    out: Float32Array | Uint16Array,
    x: Float32Array,
    weight: Float32Array,
    rows: number,
    dim: number,
    eps: number,
  ): void;

  /**
   * out[i] = silu(gate[i]) * up[i] for i < n, silu(z) = z / (1 + exp(-z)). out may alias gate or
   * up. A Uint16Array out receives bf16 bits, as rmsnorm's.
   */
  siluMul(out: Float32Array | Uint16Array, gate: Float32Array, up: Float32Array, n: number): void;

  /**
   * Rotary embedding in the Hugging Face "rotate half" layout, in place, for `rows` rows of
   * `heads` heads of `headDim`: row r sits at position positions[r]. invFreq has headDim/2
   * entries; angle = position * invFreq[i]; pairs (i, i + headDim/2) rotate together.
   */
  rope(
    x: Float32Array,
    rows: number,
    heads: number,
    headDim: number,
    positions: Int32Array,
    invFreq: Float32Array,
  ): void;

  /**
   * Causal grouped-query attention for one sequence.
   * q: [Tq, nHeads*headDim], the queries at absolute positions start .. start+Tq-1.
   * k, v: [Tkv, nKvHeads*headDim] cache rows 0 .. Tkv-1 (Tkv >= start + Tq); row stride kvStride.
   * Both float32, or both Uint16Arrays of bf16 bits (widened exactly, then the same arithmetic).
   * out: [Tq, nHeads*headDim]. Query t sees keys 0 .. start+t. Head h uses kv head h / (nHeads/nKvHeads).
   * scores = q.k * scale, softmax in float32 with max subtraction.
   */
  attention(
    out: Float32Array,
    q: Float32Array,
    k: Float32Array | Uint16Array,
    v: Float32Array | Uint16Array,
    Tq: number,
    start: number,
    nHeads: number,
    nKvHeads: number,
    headDim: number,
    kvStride: number,
    scale: number,
  ): void;

  /**
   * attention over int8 cache rows in quantizeInt8's format: row j's value i is
   * kScales[(j * kvStride + i) / 32] * k[j * kvStride + i] (v likewise), headDim and kvStride
   * multiples of 32. The same arithmetic as attention on the rows' float32 values, up to the
   * order of the sums.
   */
  attentionInt8(
    out: Float32Array,
    q: Float32Array,
    k: Int8Array,
    kScales: Float32Array,
    v: Int8Array,
    vScales: Float32Array,
    Tq: number,
    start: number,
    nHeads: number,
    nKvHeads: number,
    headDim: number,
    kvStride: number,
    scale: number,
  ): void;

  // ---- Training kernels (the backward of the ops above, and the optimizer) ----

  /**
   * AdamW over n values, in place: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
   * p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weightDecay * p). bc1 = 1 - b1^t, bc2 = 1 - b2^t.
   * g is read as g * gradScale (the product rounded once to float32; 1: as it is). In the
   * same pass, pBf16 (unless null) receives the new p as bf16 bits (toBf16's), and zeroGrad clears g.
   */
  adamw(
    p: Float32Array,
    g: Float32Array,
    m: Float32Array,
    v: Float32Array,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    bc1: number,
    bc2: number,
    gradScale: number,
    pBf16: Uint16Array | null,
    zeroGrad: boolean,
  ): void;

  /** Sum of x[i]^2 for i < n, accumulated in float64 (the global gradient norm). */
  sumSquares(x: Float32Array, n: number): number;

  /**
   * The sampler's weights over one row of V logits z: weights[i] = e^((z[i] - max z) * invT),
   * returning their sum (float64). invT > 0; past float32's range it acts as its limit, greedy.
   * Native: e^ in float32 (about 2 ulp), weights under e^-87 stored as 0.
   */
  temperedWeights(weights: Float64Array, logits: Float32Array, V: number, invT: number): number;

  /**
   * Backward of rmsnorm (y = x * rstd * w, rstd recomputed from x): dx = rstd * w * dy - x * rstd^3 / dim * sum(w * dy * x),
   * written (accumulate false) or added (true) into dx; dw (when not null) += sum over rows of dy * x * rstd.
   */
  rmsnormBackward(
    dx: Float32Array,
    dw: Float32Array | null,
    dy: Float32Array,
    x: Float32Array,
    w: Float32Array,
    rows: number,
    dim: number,
    eps: number,
    accumulate: boolean,
  ): void;

  /**
   * Backward of siluMul: dg = da * up * s * (1 + gate * (1 - s)), du = da * silu(gate), s = sigmoid(gate).
   * dg and du may both be Uint16Arrays: they then receive bf16 bits, as rmsnorm's bf16 output.
   */
  siluMulBackward(
    dg: Float32Array | Uint16Array,
    du: Float32Array | Uint16Array,
    da: Float32Array,
    gate: Float32Array,
    up: Float32Array,
    n: number,
  ): void;

  /** Per logits row [rows, V]: lse[r] = log sum exp, entropy[r] = lse - sum p z (p = softmax). */
  logitsStats(lse: Float32Array, entropy: Float32Array, logits: Float32Array, rows: number, V: number): void;

  /**
   * In place, logits -> d loss / d logits without the one-hot part:
   * dz_i = -p_i * (gSum[r] + gEntropy[r] * (log p_i + entropy[r])), p_i = exp(z_i - lse[r]).
   * (The caller then adds the gradient w.r.t. each chosen id's log-prob at that id.)
   */
  logitsBackward(
    logits: Float32Array,
    rows: number,
    V: number,
    lse: Float32Array,
    entropy: Float32Array,
    gSum: Float32Array,
    gEntropy: Float32Array,
  ): void;

  // The training attention's softmax, one block of query rows at a time (train/attention.ts):
  // S and P are [rows, cols], row stride cols; row i is query firstRow + i, which sees columns
  // 0 .. firstRow + i (cols >= firstRow + rows); the columns after those become 0.

  /** In place, S -> P = each row's softmax over its visible columns; lse[i] = log sum exp of those scores. */
  causalSoftmaxRows(S: Float32Array, lse: Float32Array, rows: number, cols: number, firstRow: number): void;

  /**
   * The backward from the same scores, in place: S -> P = exp(S - lse[i]) (the forward's
   * probabilities again) and dP -> dS = P * (dP - D_i), where D_i = dO_i . O_i, which equals
   * sum_j P_ij dP_ij for O = P V; dO and O hold `rows` rows of headDim floats, `stride` apart.
   * dP and S are distinct arrays.
   */
  causalSoftmaxBackwardRows(
    dP: Float32Array,
    S: Float32Array,
    lse: Float32Array,
    dO: Float32Array,
    O: Float32Array,
    rows: number,
    cols: number,
    firstRow: number,
    headDim: number,
    stride: number,
  ): void;

  /**
   * The training attention's forward at bf16 in one call (train/attention.ts, the same blockwise
   * scheme and roundings), parallel over (sequence, KV head): out and lse as attentionForward
   * writes them; seqs holds (start, length) pairs in order. Optional: the native addon over oneDNN
   * has it, and it returns false (writing nothing the blockwise code does not overwrite) where
   * oneDNN is not in use; the caller then runs the blockwise code. A Uint16Array out receives the
   * output's bf16 bits (toBf16's rounding of the float32 values).
   */
  attentionForwardBf16?(
    out: Float32Array | Uint16Array,
    lse: Float32Array,
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    seqs: Int32Array,
    nHeads: number,
    nKvHeads: number,
    headDim: number,
  ): boolean;

  /**
   * A prompt chunk's causal attention against a cache of bf16 rows, as model/segment-attention.ts's
   * blocked path computes it: out[Tq, H*hd] from q[Tq, H*hd] (positions start .. start+Tq-1) and
   * k, v [start+Tq, KV*hd], in one call with an online softmax over chunks of keys. Returns false
   * (nothing written) where this build or machine has no fast path: the caller computes it.
   */
  prefillAttentionBf16?(
    out: Float32Array,
    q: Float32Array,
    k: Uint16Array,
    v: Uint16Array,
    Tq: number,
    start: number,
    nHeads: number,
    nKvHeads: number,
    headDim: number,
  ): boolean;

  /**
   * The backward to attentionForwardBf16: dq, dk, dv overwritten, as attentionBackward; out as the
   * forward wrote it, float32 or bf16 bits (each row's dOut . out then reads the bits widened).
   */
  attentionBackwardBf16?(
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    dOut: Float32Array,
    out: Float32Array | Uint16Array,
    lse: Float32Array,
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    seqs: Int32Array,
    nHeads: number,
    nKvHeads: number,
    headDim: number,
  ): boolean;

  /**
   * Number of GEMM threads (no-op for portable): OpenBLAS's are process-wide; oneDNN's (OpenMP)
   * are those of the teams the calling thread starts.
   */
  setThreads(n: number): void;

  /** The GEMM threads: what setThreads last set; before that, native: the processors this process may use; portable: 1. */
  threads(): number;
}
