// The compute kernels the local engine needs, as one narrow interface with two implementations:
// `native` (the N-API addon over the system BLAS, see native/) and `portable` (plain TypeScript,
// also the oracle the native kernels are tested against).
//
// Conventions: every matrix is row-major float32; sizes are in elements; an output argument
// comes first; callers pass subarray views, so no offsets. All kernels are synchronous: call
// them from a worker thread, never from the event loop of the HTTP server.

export interface Kernels {
  /** 'native' when the BLAS addon is loaded, 'portable' for the TypeScript fallback. */
  readonly name: 'native' | 'portable';

  /** C[M,N] = alpha * op(A) * op(B) + beta * C. op(A) is [M,K], op(B) is [K,N]. */
  sgemm(
    transA: boolean, transB: boolean, M: number, N: number, K: number,
    alpha: number, A: Float32Array, lda: number, B: Float32Array, ldb: number,
    beta: number, C: Float32Array, ldc: number,
  ): void;

  /** y = alpha * op(A) * x + beta * y, with A stored [M,N]; op(A) = A ([M,N]) or A^T ([N,M]). */
  sgemv(
    trans: boolean, M: number, N: number, alpha: number, A: Float32Array, lda: number,
    x: Float32Array, beta: number, y: Float32Array,
  ): void;

  /** out[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * weight, for `rows` rows of `dim`. out may alias x. */
  rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array, rows: number, dim: number, eps: number): void;

  /** out[i] = silu(gate[i]) * up[i] for i < n, silu(z) = z / (1 + exp(-z)). out may alias gate or up. */
  siluMul(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;

  /**
   * Rotary embedding in the Hugging Face "rotate half" layout, in place, for `rows` rows of
   * `heads` heads of `headDim`: row r sits at position positions[r]. invFreq has headDim/2
   * entries; angle = position * invFreq[i]; pairs (i, i + headDim/2) rotate together.
   */
  rope(x: Float32Array, rows: number, heads: number, headDim: number, positions: Int32Array, invFreq: Float32Array): void;

  /**
   * Causal grouped-query attention for one sequence.
   * q: [Tq, nHeads*headDim], the queries at absolute positions start .. start+Tq-1.
   * k, v: [Tkv, nKvHeads*headDim] cache rows 0 .. Tkv-1 (Tkv >= start + Tq); row stride kvStride.
   * out: [Tq, nHeads*headDim]. Query t sees keys 0 .. start+t. Head h uses kv head h / (nHeads/nKvHeads).
   * scores = q.k * scale, softmax in float32 with max subtraction.
   */
  attention(
    out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array,
    Tq: number, start: number, nHeads: number, nKvHeads: number, headDim: number,
    kvStride: number, scale: number,
  ): void;

  /** Number of BLAS threads (no-op for portable). */
  setThreads(n: number): void;
}
