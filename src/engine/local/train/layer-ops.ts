// Backward passes of the elementwise layer ops whose forwards are kernels (see kernels.ts).
// Each takes the saved forward inputs and the output gradient, writes (or adds) input grads.
//
// Shapes: rows x dim for RMSNorm; n elements for SwiGLU.

/** rstd[r] = 1 / sqrt(mean(x[r,:]^2) + eps): what the RMSNorm backward needs. */
export function rmsnormRstd(rstd: Float32Array, x: Float32Array, rows: number, dim: number, eps: number): void {
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    const o = r * dim;
    for (let i = 0; i < dim; i++) ss += x[o + i]! * x[o + i]!;
    rstd[r] = 1 / Math.sqrt(ss / dim + eps);
  }
}

/**
 * y = x * rstd * w.  dx (=, or += when accumulate) and dw (+=, when given).
 * dx_i = rstd * (w_i dy_i) - x_i * rstd^3 / dim * sum_j (w_j dy_j x_j)
 */
export function rmsnormBackward(
  dx: Float32Array, dw: Float32Array | null, dy: Float32Array, x: Float32Array, w: Float32Array,
  rstd: Float32Array, rows: number, dim: number, accumulate: boolean,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * dim, rs = rstd[r]!;
    let dot = 0;
    for (let i = 0; i < dim; i++) dot += w[i]! * dy[o + i]! * x[o + i]!;
    const c = (rs * rs * rs * dot) / dim;
    for (let i = 0; i < dim; i++) {
      const g = rs * w[i]! * dy[o + i]! - x[o + i]! * c;
      dx[o + i] = accumulate ? dx[o + i]! + g : g;
    }
    if (dw) for (let i = 0; i < dim; i++) dw[i] = dw[i]! + dy[o + i]! * x[o + i]! * rs;
  }
}

/** a = silu(g) * u.  dg = da * u * s * (1 + g * (1 - s)), du = da * silu(g), s = sigmoid(g). */
export function siluMulBackward(dg: Float32Array, du: Float32Array, da: Float32Array, g: Float32Array, u: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const z = g[i]!, s = 1 / (1 + Math.exp(-z)), d = da[i]!;
    dg[i] = d * u[i]! * s * (1 + z * (1 - s));
    du[i] = d * z * s;
  }
}
