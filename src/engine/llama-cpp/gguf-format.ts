// The GGUF v3 container, as llama.cpp reads it: a writer (atomic: a temp file renamed into place)
// and a small reader (header, metadata, tensor infos) for tests and up-to-date checks.
//
// Layout (little-endian): "GGUF", version 3, tensor count (u64), metadata count (u64); the
// metadata key/values; one info record per tensor (name, dims innermost first, ggml type, offset
// into the data section); padding to the alignment (32); the tensor data, each tensor starting on
// an aligned offset.
//
// Number formats: F32; F16 (IEEE half, round to nearest even); BF16; Q8_0 (blocks of 32 values:
// one fp16 scale d = max|x|/127 and 32 int8 round(x/d), rounding half away from zero as C's roundf).

import { closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';

export type GgmlType = 'F32' | 'F16' | 'Q8_0' | 'BF16';

/** ggml_type ids. */
export const GGML_TYPE: Record<GgmlType, number> = { F32: 0, F16: 1, Q8_0: 8, BF16: 30 };
// gguf_type ids of metadata values.
const T = {
  U8: 0,
  I8: 1,
  U16: 2,
  I16: 3,
  U32: 4,
  I32: 5,
  F32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  U64: 10,
  I64: 11,
  F64: 12,
};
export const GGUF_ALIGN = 32;
export const QK8_0 = 32;
const MAGIC = 0x46554747; // "GGUF"

export type GgufValue =
  | { t: 'u32'; v: number }
  | { t: 'i32'; v: number }
  | { t: 'f32'; v: number }
  | { t: 'bool'; v: boolean }
  | { t: 'str'; v: string }
  | { t: 'strs'; v: string[] }
  | { t: 'i32s'; v: number[] };

export interface GgufTensorSource {
  name: string;
  /** numpy/PyTorch order, outermost first (written innermost first). */
  shape: number[];
  type: GgmlType;
  /** The values, row-major, in float32; converted to `type` when written. */
  values(): Float32Array;
}

/** A growable little-endian byte buffer for the header. */
class Bytes {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private ensure(n: number) {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number) {
    this.ensure(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number) {
    this.ensure(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v: number) {
    this.ensure(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  f32(v: number) {
    this.ensure(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  u8(v: number) {
    this.ensure(1);
    this.buf[this.length++] = v;
  }
  str(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.ensure(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  pad(align: number) {
    while (this.length % align) this.u8(0);
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function writeValue(b: Bytes, val: GgufValue) {
  switch (val.t) {
    case 'u32':
      b.u32(T.U32);
      b.u32(val.v);
      break;
    case 'i32':
      b.u32(T.I32);
      b.i32(val.v);
      break;
    case 'f32':
      b.u32(T.F32);
      b.f32(val.v);
      break;
    case 'bool':
      b.u32(T.BOOL);
      b.u8(val.v ? 1 : 0);
      break;
    case 'str':
      b.u32(T.STRING);
      b.str(val.v);
      break;
    case 'strs':
      b.u32(T.ARRAY);
      b.u32(T.STRING);
      b.u64(val.v.length);
      for (const s of val.v) b.str(s);
      break;
    case 'i32s':
      b.u32(T.ARRAY);
      b.u32(T.I32);
      b.u64(val.v.length);
      for (const x of val.v) b.i32(x);
      break;
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half bits of x, round to nearest even, with subnormals, overflow to infinity. */
export function toFp16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000; // implicit 1
    const shift = 14 - e; // 24-bit significand down to a 10-bit subnormal field
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m; // a carry into bit 10 is the smallest normal, still correct
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && m & 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

export function fromFp16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1,
    e = (h >>> 10) & 0x1f,
    m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** Q8_0 blocks of `x` (length a multiple of 32): 34 bytes each. */
export function quantizeQ8_0(x: Float32Array): Buffer {
  const nb = x.length / QK8_0;
  const out = Buffer.alloc(nb * 34);
  const q = new Int8Array(out.buffer, out.byteOffset, out.length);
  for (let b = 0; b < nb; b++) {
    const base = b * QK8_0;
    let amax = 0;
    for (let j = 0; j < QK8_0; j++) amax = Math.max(amax, Math.abs(x[base + j]!));
    const d = amax / 127,
      id = d ? 1 / d : 0;
    const o = b * 34;
    out.writeUInt16LE(toFp16Bits(d), o);
    for (let j = 0; j < QK8_0; j++) {
      const v = x[base + j]! * id;
      q[o + 2 + j] = v < 0 ? -Math.round(-v) : Math.round(v);
    }
  }
  return out;
}

/** The values of Q8_0 blocks (what llama.cpp computes with). */
export function dequantizeQ8_0(data: Buffer, count: number): Float32Array {
  const out = new Float32Array(count);
  const q = new Int8Array(data.buffer, data.byteOffset, data.length);
  for (let b = 0; b < count / QK8_0; b++) {
    const d = fromFp16Bits(data.readUInt16LE(b * 34));
    for (let j = 0; j < QK8_0; j++) out[b * QK8_0 + j] = d * q[b * 34 + 2 + j]!;
  }
  return out;
}

function toF16Buffer(x: Float32Array): Buffer {
  const out = Buffer.alloc(x.length * 2);
  for (let i = 0; i < x.length; i++) out.writeUInt16LE(toFp16Bits(x[i]!), 2 * i);
  return out;
}

function toBf16Buffer(x: Float32Array): Buffer {
  const out = Buffer.alloc(x.length * 2);
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < x.length; i++) {
    const v = bits[i]!;
    const r = (v & 0x7fffffff) > 0x7f800000 ? ((v >>> 16) & 0x8000) | 0x7fc0 : (v + 0x7fff + ((v >>> 16) & 1)) >>> 16;
    out.writeUInt16LE(r & 0xffff, 2 * i);
  }
  return out;
}

export function tensorBytes(type: GgmlType, count: number): number {
  if (type === 'F32') return 4 * count;
  if (type === 'F16' || type === 'BF16') return 2 * count;
  return (count / QK8_0) * 34;
}

function encode(type: GgmlType, x: Float32Array): Buffer {
  if (type === 'F32') return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  if (type === 'F16') return toF16Buffer(x);
  if (type === 'BF16') return toBf16Buffer(x);
  return quantizeQ8_0(x);
}

/** Writes a GGUF file at `out` atomically (temp file, fsync, rename); returns its size in bytes. */
export function writeGgufFile(out: string, meta: [string, GgufValue][], tensors: GgufTensorSource[]): number {
  const offsets: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (t.type === 'Q8_0' && t.shape[t.shape.length - 1]! % QK8_0)
      throw new Error(`${t.name}: row length ${t.shape[t.shape.length - 1]} is not a multiple of ${QK8_0} (Q8_0)`);
    offsets.push(offset);
    offset += Math.ceil(tensorBytes(t.type, count) / GGUF_ALIGN) * GGUF_ALIGN;
  }
  const h = new Bytes();
  h.u32(MAGIC);
  h.u32(3);
  h.u64(tensors.length);
  h.u64(meta.length + 1);
  h.str('general.alignment');
  writeValue(h, { t: 'u32', v: GGUF_ALIGN });
  for (const [k, v] of meta) {
    h.str(k);
    writeValue(h, v);
  }
  tensors.forEach((t, i) => {
    h.str(t.name);
    h.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) h.u64(d);
    h.u32(GGML_TYPE[t.type]);
    h.u64(offsets[i]!);
  });
  h.pad(GGUF_ALIGN);

  const tmp = `${out}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, h.bytes());
    const zeros = Buffer.alloc(GGUF_ALIGN);
    for (const t of tensors) {
      const data = encode(t.type, t.values());
      writeSync(fd, data);
      const padded = Math.ceil(data.length / GGUF_ALIGN) * GGUF_ALIGN;
      if (padded > data.length) writeSync(fd, zeros, 0, padded - data.length);
    }
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, out);
  return h.length + offset;
}

export interface GgufTensorInfo {
  name: string;
  /** Outermost first, as written from. */
  shape: number[];
  type: number;
  /** Absolute position of the data in the file. */
  fileOffset: number;
}

export interface GgufFile {
  version: number;
  meta: Map<string, unknown>;
  tensors: GgufTensorInfo[];
}

/** Reads a GGUF file's header, metadata and tensor infos (not the data). */
export function readGgufHeader(path: string): GgufFile {
  const fd = openSync(path, 'r');
  try {
    let pos = 0;
    let buf = Buffer.alloc(0);
    let bufStart = 0;
    const need = (n: number) => {
      if (pos + n <= bufStart + buf.length) return;
      const size = Math.max(n, 1 << 20);
      buf = Buffer.alloc(size);
      bufStart = pos;
      const got = readSync(fd, buf, 0, size, pos);
      buf = buf.subarray(0, got);
      if (got < n) throw new Error(`${path}: truncated GGUF header`);
    };
    /** Makes n bytes at pos readable, advances past them and returns their index in buf. */
    const take = (n: number): number => {
      need(n);
      pos += n;
      return pos - n - bufStart;
    };
    // take() may replace buf, so it runs before buf is read.
    const at = <V>(n: number, read: (b: Buffer, i: number) => V): V => {
      const i = take(n);
      return read(buf, i);
    };
    const r = {
      u8: () => at(1, (b, i) => b[i]!),
      u32: () => at(4, (b, i) => b.readUInt32LE(i)),
      i32: () => at(4, (b, i) => b.readInt32LE(i)),
      f32: () => at(4, (b, i) => b.readFloatLE(i)),
      u64: () => at(8, (b, i) => Number(b.readBigUInt64LE(i))),
      str: (): string => {
        const n = r.u64();
        const i = take(n);
        return buf.toString('utf8', i, i + n);
      },
    };
    const scalar = (type: number): unknown => {
      switch (type) {
        case T.U8:
          return r.u8();
        case T.U32:
          return r.u32();
        case T.I32:
          return r.i32();
        case T.F32:
          return r.f32();
        case T.BOOL:
          return r.u8() !== 0;
        case T.STRING:
          return r.str();
        case T.U64:
          return r.u64();
        default:
          throw new Error(`${path}: metadata type ${type} is not read here`);
      }
    };
    if (r.u32() !== MAGIC) throw new Error(`${path}: not a GGUF file`);
    const version = r.u32();
    const nTensors = r.u64();
    const nMeta = r.u64();
    const meta = new Map<string, unknown>();
    for (let i = 0; i < nMeta; i++) {
      const key = r.str();
      const type = r.u32();
      if (type === T.ARRAY) {
        const itemType = r.u32();
        const n = r.u64();
        meta.set(
          key,
          Array.from({ length: n }, () => scalar(itemType)),
        );
      } else meta.set(key, scalar(type));
    }
    const infos: { name: string; shape: number[]; type: number; offset: number }[] = [];
    for (let i = 0; i < nTensors; i++) {
      const name = r.str();
      const nd = r.u32();
      const dims = Array.from({ length: nd }, () => r.u64());
      infos.push({ name, shape: dims.reverse(), type: r.u32(), offset: r.u64() });
    }
    const align = (meta.get('general.alignment') as number | undefined) ?? GGUF_ALIGN;
    const dataStart = Math.ceil(pos / align) * align;
    const tensors = infos.map((t) => ({
      name: t.name,
      shape: t.shape,
      type: t.type,
      fileOffset: dataStart + t.offset,
    }));
    return { version, meta, tensors };
  } finally {
    closeSync(fd);
  }
}

/** The raw bytes of one tensor of a GGUF file. */
export function readGgufTensorBytes(path: string, t: GgufTensorInfo): Buffer {
  const type = (Object.keys(GGML_TYPE) as GgmlType[]).find((k) => GGML_TYPE[k] === t.type);
  if (!type) throw new Error(`${t.name}: ggml type ${t.type} is not read here`);
  const bytes = tensorBytes(
    type,
    t.shape.reduce((a, b) => a * b, 1),
  );
  const out = Buffer.alloc(bytes);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, out, 0, bytes, t.fileOffset);
  } finally {
    closeSync(fd);
  }
  return out;
}
