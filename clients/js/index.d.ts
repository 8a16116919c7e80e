// Types of the polygrad package: the JavaScript client of polygradd.
// The one-op methods (exp, sin, erf, logaddexp, lerp, softplus, ...) are declared in ops.gen.d.ts,
// generated from the op schema by scripts/gen-ops, and merged into Tensor below.
import type { OpMethods } from './ops.gen';

/** What sort, topk, cummax and cummin return: destructures as [values, indices]. */
export type ValuesIndices = [Tensor, Tensor] & { values: Tensor; indices: Tensor };

export declare class DType {
  readonly priority: number;
  readonly itemsize: number;
  readonly name: DTypeName;
  /** 'b' bool, 'i' signed integer, 'u' unsigned integer, 'f' float */
  readonly kind: 'b' | 'i' | 'u' | 'f';
  /** the polygrad.v1.DType enum value */
  readonly wire: number;
}

export type DTypeName = 'bool' | 'int8' | 'uint8' | 'int16' | 'uint16' | 'int32' | 'uint32' | 'int64' | 'uint64'
  | 'float16' | 'bfloat16' | 'float32' | 'float64';
export type DTypeLike = DType | DTypeName;

export declare const dtypes: {
  readonly bool: DType; readonly int8: DType; readonly uint8: DType; readonly int16: DType; readonly uint16: DType;
  readonly int32: DType; readonly uint32: DType; readonly int64: DType; readonly uint64: DType;
  readonly float16: DType; readonly bfloat16: DType; readonly float32: DType; readonly float64: DType;
  readonly char: DType; readonly uchar: DType; readonly short: DType; readonly ushort: DType; readonly int: DType;
  readonly uint: DType; readonly long: DType; readonly ulong: DType; readonly half: DType; readonly float: DType;
  readonly double: DType;
  readonly defaultFloat: DType;
  readonly defaultInt: DType;
  readonly all: readonly DType[];
  isFloat(dt: DType): boolean;
  isInt(dt: DType): boolean;
  isUnsigned(dt: DType): boolean;
  isBool(dt: DType): boolean;
  fromWire(value: number): DType;
  min(dt: DType): number | bigint | boolean;
  max(dt: DType): number | bigint | boolean;
};

/** What data() resolves to: the dtype's TypedArray (float16/bfloat16 as their bits in a Uint16Array, bool as 0/1 bytes). */
export type TensorData = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array
  | Uint32Array | BigInt64Array | BigUint64Array;
export type Scalar = number | boolean | bigint;
export type NestedArray = Scalar | NestedArray[];
export type TensorLike = Tensor | Scalar | NestedArray | TensorData;
export type Shape = number[];

export interface CreateOptions {
  dtype?: DTypeLike;
  shape?: Shape;
  device?: string;
  requiresGrad?: boolean;
}
export interface FactoryOptions {
  dtype?: DTypeLike;
  device?: string;
  requiresGrad?: boolean;
}
export interface ReduceOptions {
  axis?: number | number[] | null;
  keepdim?: boolean;
}
export interface SumOptions extends ReduceOptions {
  dtype?: DTypeLike;
}
export interface VarOptions extends ReduceOptions {
  correction?: number;
}
/** Convolution and pooling take 1, 2 or 3 spatial axes: one value per axis, or a number for all. */
export interface Conv2dOptions {
  groups?: number;
  stride?: number | number[];
  dilation?: number | number[];
  /** a number, one value per axis, or (before, after) pairs from the last axis back: [left, right, top, bottom] in 2-D */
  padding?: number | number[];
}
export interface PoolOptions {
  stride?: number | number[] | null;
  dilation?: number | number[];
  padding?: number | number[];
  /** keep a last partial window that starts inside the input or its before-padding (torch's ceil_mode; default false) */
  ceilMode?: boolean;
  /** avgPool2d only: whether padded zeros count in a window's mean (default true, as torch); ceilMode's extra padding never counts. */
  countIncludePad?: boolean;
}
/** A slice: 'start:stop:step' (parts may be empty) or { start, stop, step } (a SymInt stop from 0 or
 * from a SymInt start of the same Variable: a symbolic shrink). */
export type SliceSpec = string | { start?: Size | null; stop?: Size | null; step?: number | null };
/** One index entry: a number selects, a slice slices, null adds an axis, '...' is an ellipsis, integer arrays/tensors index. */
export type IndexSpec = Size | SliceSpec | null | '...' | Tensor | number[] | Int32Array;

/** tinygrad's Variable: a named integer in [min, max], bound to a value per call. */
export declare class Variable {
  constructor(name: string, min: number, max: number);
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** This variable at `value` (an integer in [min, max], else RangeError). */
  bind(value: number): BoundVariable;
}
/** `variable * factor + offset` at the variable's bound value. In a reshape/expand shape or a shrink's
 * end from 0 it makes a symbolic dim (the tensor's shape holds its largest size, `max`); a shrink's
 * begin with end = begin + k is read per run. Any other use (Number(v), v + 1, v.value) takes the
 * value as a plain number, which makes a jit capture again for a new value. */
export declare class SymInt {
  readonly variable: Variable;
  readonly factor: number;
  readonly offset: number;
  /** The largest value: the axis' size on the daemon. */
  readonly max: number;
  readonly min: number;
  /** The value as a plain number (a use jit notes). */
  readonly value: number;
  add(k: number): SymInt;
  sub(k: number): SymInt;
  /** k a positive integer. */
  mul(k: number): SymInt;
  valueOf(): number;
}
export declare class BoundVariable extends SymInt {
  unbind(): [Variable, number];
}
/** A size: a number, or a Variable's SymInt where shapes and shrink bounds take one. */
export type Size = number | SymInt;

export declare class Tensor {
  /** Tensor.training switches dropout and BatchNorm statistics on. */
  static training: boolean;

  static from(data: TensorLike, options?: CreateOptions): Tensor;
  static zeros(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static ones(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static empty(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static full(shape: Shape | number, fillValue: Scalar, options?: FactoryOptions): Tensor;
  static arange(...args: Array<number | FactoryOptions>): Tensor;
  static linspace(start: number, stop: number, steps: number, options?: FactoryOptions): Tensor;
  static eye(n: number, m?: number | FactoryOptions, options?: FactoryOptions): Tensor;
  static rand(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static randn(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static randint(...shape: Array<number | Shape | (FactoryOptions & { low?: number; high?: number })>): Tensor;
  /** randn scaled by std and shifted by mean, on the device. */
  static normal(...shape: Array<number | Shape | (FactoryOptions & { mean?: number; std?: number })>): Tensor;
  /** A random permutation of 0..n-1 (int32 unless dtype): argsort of n uniform draws. */
  static randperm(n: number, options?: { dtype?: DTypeLike }): Tensor;
  static uniform(...shape: Array<number | Shape | (FactoryOptions & { low?: number; high?: number })>): Tensor;
  static scaledUniform(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static glorotUniform(...shape: Array<number | Shape | FactoryOptions>): Tensor;
  static kaimingUniform(...shape: Array<number | Shape | (FactoryOptions & { a?: number })>): Tensor;
  static kaimingNormal(...shape: Array<number | Shape | (FactoryOptions & { a?: number })>): Tensor;
  /** Seeds rand/randn/randint/dropout (the daemon's generator: the same seed gives the same numbers as Python) and the initializers. */
  static manualSeed(seed?: number | bigint): void;
  static cat(tensors: Tensor[], options?: { axis?: number }): Tensor;
  static stack(tensors: Tensor[], options?: { axis?: number }): Tensor;
  /** numpy's einsum (the daemon's EINSUM): "ij,jk->ik", "...", diagonals ("ii->i"), implicit outputs. */
  static einsum(formula: string, ...operands: Array<Tensor | Tensor[]>): Tensor;
  /** The bytes at an http(s) URL as a uint8 tensor; gunzip decompresses them first. */
  static fromUrl(url: string, options?: { gunzip?: boolean; timeout?: number; device?: string }): Promise<Tensor>;
  static meshgrid(tensors: Tensor[], options?: { indexing?: 'ij' | 'xy' }): Tensor[];
  static where(cond: Tensor, x: Tensor | Scalar, y: Tensor | Scalar): Tensor;
  /** Realizes several tensors in one request. */
  static realize(...tensors: Tensor[]): Promise<void>;
  /** Waits until the daemon has run everything sent; rejects with the first error among it. */
  static synchronize(): Promise<void>;
  /** Runs fn with gradient tracking off (until its promise settles, for an async fn). */
  static noGrad<T>(fn: () => T): T;
  static readonly isNoGrad: boolean;
  /** Runs fn with Tensor.training = mode (default true), restoring the flag after (after its promise settles). */
  static train<T>(fn: () => T, mode?: boolean): T;
  /** Runs fn with Tensor.training = false. */
  static test<T>(fn: () => T): T;

  readonly shape: Shape;
  readonly dtype: DType;
  readonly device: string;
  readonly ndim: number;
  readonly nodeId: number;
  readonly isRealized: boolean;
  readonly T: Tensor;
  requiresGrad: boolean | null;
  grad: Tensor | null;
  numel(): number;
  elementSize(): number;
  nbytes(): number;
  size(): Shape;
  size(dim: number): number;
  toString(): string;

  realize(...others: Tensor[]): Promise<this>;
  data(): Promise<TensorData>;
  array(): Promise<any>;
  item(): Promise<number | bigint | boolean>;
  /** Releases the daemon's node and buffer now rather than when garbage collected. */
  dispose(): Promise<void>;
  [Symbol.dispose](): void;

  requiresGrad_(value?: boolean): this;
  backward(options?: { gradient?: Tensor }): this;
  gradient(targets: Tensor[], options?: { gradient?: Tensor }): Tensor[];
  detach(): Tensor;
  clone(): Tensor;
  assign(x: TensorLike): this;

  fullLike(value: Scalar, options?: FactoryOptions): Tensor;
  zerosLike(options?: FactoryOptions): Tensor;
  onesLike(options?: FactoryOptions): Tensor;
  randLike(options?: FactoryOptions): Tensor;
  randnLike(options?: FactoryOptions): Tensor;

  cast(dtype: DTypeLike): Tensor;
  bitcast(dtype: DTypeLike): Tensor;
  float(): Tensor;
  half(): Tensor;
  long(): Tensor;
  short(): Tensor;
  bfloat16(): Tensor;
  isFloatingPoint(): boolean;
  int(): Tensor;
  bool(): Tensor;
  double(): Tensor;
  to(device: string): Tensor;
  cpu(): Tensor;
  cuda(): Tensor;

  add(x: Tensor | Scalar, reverse?: boolean): Tensor;
  sub(x: Tensor | Scalar, reverse?: boolean): Tensor;
  mul(x: Tensor | Scalar, reverse?: boolean): Tensor;
  div(x: Tensor | Scalar, reverse?: boolean): Tensor;
  pow(x: Tensor | Scalar, reverse?: boolean): Tensor;
  neg(): Tensor;
  maximum(x: Tensor | Scalar): Tensor;
  minimum(x: Tensor | Scalar): Tensor;
  clamp(min?: Tensor | Scalar | null, max?: Tensor | Scalar | null): Tensor;
  clip(min?: Tensor | Scalar | null, max?: Tensor | Scalar | null): Tensor;
  idiv(x: Tensor | Scalar, reverse?: boolean): Tensor;
  fmod(x: Tensor | Scalar, reverse?: boolean): Tensor;
  floorDivide(x: Tensor | Scalar, reverse?: boolean): Tensor;
  remainder(x: Tensor | Scalar, reverse?: boolean): Tensor;
  mod(x: Tensor | Scalar, reverse?: boolean): Tensor;
  lshift(n: number): Tensor;
  rshift(n: number): Tensor;
  bitwiseAnd(x: Tensor | Scalar): Tensor;
  bitwiseOr(x: Tensor | Scalar): Tensor;
  bitwiseXor(x: Tensor | Scalar): Tensor;
  bitwiseNot(): Tensor;
  logicalNot(): Tensor;
  logicalAnd(x: Tensor | Scalar): Tensor;
  logicalOr(x: Tensor | Scalar): Tensor;
  lt(x: Tensor | Scalar): Tensor;
  le(x: Tensor | Scalar): Tensor;
  gt(x: Tensor | Scalar): Tensor;
  ge(x: Tensor | Scalar): Tensor;
  eq(x: Tensor | Scalar): Tensor;
  ne(x: Tensor | Scalar): Tensor;
  /** this is the condition */
  where(x: Tensor | Scalar, y: Tensor | Scalar): Tensor;

  relu(): Tensor;
  /** 'tanh' (the default, tinygrad's) or 'none' (torch's exact gelu) */
  gelu(approximate?: 'tanh' | 'none'): Tensor;
  /** silu */
  swish(): Tensor;
  isclose(other: Tensor | Scalar, options?: { rtol?: number; atol?: number; equalNan?: boolean }): Tensor;
  /** Whether every element isclose (this realizes). */
  allclose(other: Tensor | Scalar, options?: { rtol?: number; atol?: number; equalNan?: boolean }): Promise<boolean>;

  sum(options?: SumOptions): Tensor;
  sum(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  prod(options?: SumOptions): Tensor;
  prod(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  max(options?: ReduceOptions): Tensor;
  max(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  min(options?: ReduceOptions): Tensor;
  min(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  mean(options?: ReduceOptions): Tensor;
  mean(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  var(options?: VarOptions): Tensor;
  var(axis?: number | number[] | null, keepdim?: boolean, correction?: number): Tensor;
  std(options?: VarOptions): Tensor;
  std(axis?: number | number[] | null, keepdim?: boolean, correction?: number): Tensor;
  stdMean(options?: VarOptions): [Tensor, Tensor];
  stdMean(axis?: number | number[] | null, keepdim?: boolean, correction?: number): [Tensor, Tensor];
  varMean(options?: VarOptions): [Tensor, Tensor];
  varMean(axis?: number | number[] | null, keepdim?: boolean, correction?: number): [Tensor, Tensor];
  /** Whether any / every element is nonzero (bool); all is true over no elements. */
  any(options?: ReduceOptions): Tensor;
  any(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  all(options?: ReduceOptions): Tensor;
  all(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  logsumexp(options?: ReduceOptions): Tensor;
  logsumexp(axis?: number | number[] | null, keepdim?: boolean): Tensor;
  argmax(options?: { axis?: number | null; keepdim?: boolean }): Tensor;
  argmax(axis?: number | null, keepdim?: boolean): Tensor;
  argmin(options?: { axis?: number | null; keepdim?: boolean }): Tensor;
  argmin(axis?: number | null, keepdim?: boolean): Tensor;
  cumsum(axis?: number | { axis?: number }): Tensor;
  /** Stable sort along dim (NaN last, first when descending): [values, indices], also .values/.indices. */
  sort(dim?: number | { dim?: number; descending?: boolean }, descending?: boolean): ValuesIndices;
  argsort(dim?: number | { dim?: number; descending?: boolean }, descending?: boolean): Tensor;
  topk(k: number, dim?: number | { dim?: number; largest?: boolean }, largest?: boolean): ValuesIndices;
  cummax(axis?: number | { axis?: number }): ValuesIndices;
  cummin(axis?: number | { axis?: number }): ValuesIndices;
  cumprod(axis?: number | { axis?: number }): Tensor;
  logcumsumexp(axis?: number | { axis?: number }): Tensor;
  softmax(axis?: number | { axis?: number; dtype?: DTypeLike }): Tensor;
  logSoftmax(axis?: number | { axis?: number; dtype?: DTypeLike }): Tensor;
  layernorm(axis?: number | number[] | { axis?: number | number[]; eps?: number; weight?: Tensor | null; bias?: Tensor | null }, eps?: number): Tensor;

  reshape(...shape: Array<Size | null> | [Array<Size | null>]): Tensor;
  view(...shape: Array<Size | null> | [Array<Size | null>]): Tensor;
  permute(...order: number[] | [number[]]): Tensor;
  transpose(dim0?: number, dim1?: number): Tensor;
  expand(...shape: Size[] | [Size[]]): Tensor;
  /** one [before, after] pair (or null) per axis, or a flat torch-style list (last axis first) */
  pad(padding: Array<[number, number] | null> | number[], options?: { value?: Scalar }): Tensor;
  /** A SymInt end from 0 is a symbolic dim; a SymInt begin with end = begin.add(k) reads from a begin held per run. */
  shrink(pairs: Array<[Size, Size] | null>): Tensor;
  flip(...axes: number[] | [number[]]): Tensor;
  squeeze(dim?: number): Tensor;
  unsqueeze(dim: number): Tensor;
  flatten(startDim?: number, endDim?: number): Tensor;
  unflatten(dim: number, sizes: number[]): Tensor;
  repeat(...repeats: number[] | [number[]]): Tensor;
  cat(...others: Array<Tensor | { axis?: number }>): Tensor;
  split(sizes: number | number[], options?: { axis?: number }): Tensor[];
  chunk(chunks: number, options?: { axis?: number }): Tensor[];
  roll(shifts: number | number[], dims?: number | number[] | null): Tensor;
  diagonal(options?: { offset?: number; dim1?: number; dim2?: number }): Tensor;
  diag(diagonal?: number): Tensor;
  meshgrid(...others: (Tensor | { indexing?: 'ij' | 'xy' })[]): Tensor[];
  repeatInterleave(repeats: number, options?: { axis?: number | null }): Tensor;
  maskedFill(mask: Tensor | boolean[], value: Scalar): Tensor;
  /** numpy/torch indexing: t.index(0, '1:3', null, '...', indexTensor) */
  index(...idx: IndexSpec[]): Tensor;
  /** t[idx] = v: index()'s entries, then v (cast to t's dtype, broadcast to what they select), written
   * where t.index(...idx) reads; a bool tensor of t's shape as the only entry is a mask. An assign: returns t. */
  setitem(...args: [...IndexSpec[], TensorLike]): this;
  /** per-axis ranges, axes kept: t.slice([0, 2], null, [1, null, -1]) */
  slice(...specs: Array<[Size | null, (Size | null)?, (number | null)?] | SliceSpec | null>): Tensor;

  matmul(w: Tensor | NestedArray, options?: { dtype?: DTypeLike }): Tensor;
  dot(w: Tensor | NestedArray, options?: { dtype?: DTypeLike }): Tensor;
  linear(weight: Tensor, bias?: Tensor | null): Tensor;
  sequential(layers: Array<((x: Tensor) => Tensor) | { forward(x: Tensor): Tensor }>): Tensor;
  conv2d(weight: Tensor, bias?: Tensor | null, options?: Conv2dOptions): Tensor;
  convTranspose2d(weight: Tensor, bias?: Tensor | null, options?: Conv2dOptions & { outputPadding?: number | number[] }): Tensor;
  /** over the last kernelSize.length axes (1 to 3; a number: 2-D) */
  maxPool2d(kernelSize?: number | number[], options?: PoolOptions): Tensor;
  /** with returnIndices: [values, indices] (also .values, .indices), int32 flat positions in the spatial volume (torch's). */
  maxPool2d(kernelSize: number | number[] | undefined, options: PoolOptions & { returnIndices: true }): [Tensor, Tensor] & { values: Tensor; indices: Tensor };
  avgPool2d(kernelSize?: number | number[], options?: PoolOptions): Tensor;
  tril(diagonal?: number): Tensor;
  triu(diagonal?: number): Tensor;
  gather(dim: number, index: Tensor | NestedArray): Tensor;
  oneHot(numClasses: number): Tensor;
  /** torch's scatter: src (a tensor or a number) written at index along dim; colliding updates sum. */
  scatter(dim: number, index: Tensor | NestedArray, src: Tensor | number, reduce?: 'add' | 'multiply' | { reduce?: 'add' | 'multiply' }): Tensor;
  scatterReduce(dim: number, index: Tensor | NestedArray, src: Tensor, reduce: 'sum' | 'prod' | 'mean' | 'amax' | 'amin',
    options?: { includeSelf?: boolean }): Tensor;
  /** torch's nll_loss: log-probabilities (N, C, ...) or (C), class indices (N, ...) or (). */
  nllLoss(Y: Tensor | NestedArray, options?: { weight?: Tensor | NestedArray; ignoreIndex?: number;
    reduction?: 'mean' | 'sum' | 'none' }): Tensor;
  /** Resizes the last size.length axes (torch's F.interpolate on the spatial axes). */
  interpolate(size: number[], options?: { mode?: 'linear' | 'nearest' | 'nearest-exact'; alignCorners?: boolean }): Tensor;
  /** torch's Tensor.unfold: windows of size every step along dim, as a new last axis. */
  unfold(dim: number, size: number, step: number): Tensor;
  /** (count, ndim) int32 positions of the nonzero elements; async: the count is read first.
   * With `size`, exactly that many rows (no round trip), the rest `fillValue`. */
  nonzero(opts?: { size?: number; fillValue?: number }): Promise<Tensor>;
  maskedSelect(mask: Tensor | NestedArray, opts?: { size?: number; fillValue?: number }): Promise<Tensor>;
  /** int32 class indices drawn from the weights along the last axis of a 1-D or 2-D tensor. */
  multinomial(numSamples?: number, replacement?: boolean | { replacement?: boolean }): Tensor;
  /** torch's max_unpool1d/2d/3d over the last kernelSize.length axes (a number: 2-D), with maxPool2d's indices. */
  maxUnpool2d(indices: Tensor | NestedArray, options?: { kernelSize?: number | number[];
    stride?: number | number[]; padding?: number | number[]; outputSize?: number[] }): Tensor;
  contiguousBackward(): Tensor;
  /** This tensor now stands for x (same shape): x's dtype and history come along. */
  replace(x: Tensor): Tensor;
  crossEntropy(y: Tensor | NestedArray, options?: { reduction?: 'mean' | 'sum' | 'none'; labelSmoothing?: number; axis?: number }): Tensor;
  sparseCategoricalCrossentropy(y: Tensor, options?: { ignoreIndex?: number; labelSmoothing?: number; reduction?: 'mean' | 'sum' | 'none' }): Tensor;
  binaryCrossentropy(y: Tensor, options?: { reduction?: 'mean' | 'sum' | 'none' }): Tensor;
  binaryCrossentropyLogits(y: Tensor, options?: { reduction?: 'mean' | 'sum' | 'none'; posWeight?: Tensor | number }): Tensor;
  dropout(p?: number): Tensor;
  rmsNorm(axis?: number | number[], eps?: number, weight?: Tensor | null): Tensor;
  groupNorm(numGroups: number, weight?: Tensor | null, bias?: Tensor | null, eps?: number): Tensor;
  batchnorm(weight: Tensor | null, bias: Tensor | null, mean: Tensor, invstd: Tensor, axis?: number | number[]): Tensor;
  batchNorm(options?: { runningMean?: Tensor | null; runningVar?: Tensor | null; weight?: Tensor | null; bias?: Tensor | null; training?: boolean; eps?: number }): Tensor;
  /** tinygrad's newton_schulz over the last two axes (Muon's orthogonalization). */
  newtonSchulz(steps: number, params: number[], options?: { eps?: number }): Tensor;
  /** torch.linalg.qr's reduced [Q, R] of the last two axes. */
  qr(): [Tensor, Tensor];
  /** einops.rearrange: "b (h w) c -> b h w c" with { h: 2 }. */
  rearrange(formula: string, sizes?: Record<string, number>): Tensor;
  /** [U, S, Vh] of the last two axes by Jacobi rotations (small matrices); fullMatrices: square only. */
  svd(options?: { fullMatrices?: boolean; sweeps?: number }): [Tensor, Tensor, Tensor];
  /** dropoutP drops attention weights while Tensor.training (drawn on the daemon, as dropout's). */
  scaledDotProductAttention(key: Tensor, value: Tensor, options?: { attnMask?: Tensor | null; isCausal?: boolean; dropoutP?: number }): Tensor;
}
/** The one-op methods generated from the op schema (ops.gen.d.ts), merged into the class. */
export interface Tensor extends OpMethods {}

export interface Layer {
  forward(x: Tensor): Tensor;
}

export declare namespace nn {
  class Linear implements Layer {
    constructor(inFeatures: number, outFeatures: number, options?: { bias?: boolean });
    weight: Tensor;
    bias: Tensor | null;
    forward(x: Tensor): Tensor;
  }
  class Conv2d implements Layer {
    constructor(inChannels: number, outChannels: number, kernelSize: number | number[],
      options?: { stride?: number | [number, number]; padding?: number | number[] | 'valid' | 'same'; dilation?: number | [number, number]; groups?: number; bias?: boolean });
    weight: Tensor;
    bias: Tensor | null;
    forward(x: Tensor): Tensor;
  }
  class LayerNorm implements Layer {
    constructor(normalizedShape: number | number[], options?: { eps?: number; elementwiseAffine?: boolean });
    weight: Tensor | null;
    bias: Tensor | null;
    forward(x: Tensor): Tensor;
  }
  class RMSNorm implements Layer {
    constructor(dim: number, options?: { eps?: number; elementwiseAffine?: boolean });
    weight: Tensor | null;
    forward(x: Tensor): Tensor;
  }
  class Embedding implements Layer {
    constructor(vocabSize: number, embedSize: number);
    weight: Tensor;
    forward(idx: Tensor | NestedArray): Tensor;
  }
  class Dropout implements Layer {
    constructor(p?: number);
    forward(x: Tensor): Tensor;
  }
  class BatchNorm implements Layer {
    constructor(size: number, options?: { eps?: number; affine?: boolean; trackRunningStats?: boolean; momentum?: number });
    forward(x: Tensor): Tensor;
  }
  class BatchNorm2d extends BatchNorm {}
  class GroupNorm implements Layer {
    constructor(numGroups: number, numChannels: number, options?: { eps?: number; affine?: boolean });
    forward(x: Tensor): Tensor;
  }
  class Optimizer {
    params: Tensor[];
    lr: number;
    steps: number;
    zeroGrad(): void;
    /** Updates every parameter with a gradient, in one Realize request. */
    step(): Promise<void>;
    stateTensors(): Record<string, Tensor>;
  }
  class SGD extends Optimizer {
    constructor(params: Iterable<Tensor>, options?: { lr?: number; momentum?: number; weightDecay?: number; nesterov?: boolean });
  }
  /** tinygrad's LARS: SGD scaled per parameter by the trust ratio tcoef ||p|| / (||g|| + weightDecay ||p||). */
  class LARS extends SGD {
    constructor(params: Iterable<Tensor>, options?: { lr?: number; momentum?: number; weightDecay?: number; nesterov?: boolean;
      classic?: boolean; tcoef?: number });
  }
  /** Muon: nesterov momentum, each direction orthogonalized by Newton-Schulz, decoupled decay; parameters of rank >= 2. */
  class Muon extends SGD {
    constructor(params: Iterable<Tensor>, options?: { lr?: number; momentum?: number; weightDecay?: number; nsSteps?: number;
      nsCoefficients?: number[]; nesterov?: boolean });
  }
  class Adam extends Optimizer {
    constructor(params: Iterable<Tensor>, options?: { lr?: number; betas?: [number, number]; eps?: number; weightDecay?: number });
  }
  class AdamW extends Adam {}
  /** tinygrad's LAMB: the Adam direction plus weightDecay * p, scaled by the trust ratio ||p|| / ||update||. */
  class LAMB extends Optimizer {
    constructor(params: Iterable<Tensor>, options?: { lr?: number; b1?: number; b2?: number; eps?: number; weightDecay?: number });
  }
  function getParameters(model: unknown): Tensor[];
  function getStateDict(model: unknown): Record<string, Tensor>;
  function loadStateDict(model: unknown, stateDict: Record<string, Tensor | TensorData | NestedArray>,
    options?: { strict?: boolean; realize?: boolean }): Promise<string[]>;
  function safeSave(tensors: Record<string, Tensor>, path: string, options?: { metadata?: Record<string, string> }): Promise<string[]>;
  /** Tensors of a safetensors file. A damaged or hostile file throws RangeError naming the file
   *  and what is wrong (TypeError for an unsupported dtype); nothing outside a tensor's bytes is read. */
  function safeLoad(path: string): Record<string, Tensor>;
}

export declare class CompiledStep {
  readonly stepId: string;
  readonly nKernels: number;
  readonly nIntermediates: number;
  readonly intermediateBytes: number;
  readonly compileSeconds: number;
  readonly runs: number;
  readonly inputNames: string[];
  /** The names of the Variables the step has symbolic dims of (a jit replay sets them per run). */
  readonly variables: Set<string>;
  setInput(nameOrTensor: string | Tensor, data: Tensor | TensorData | NestedArray): Promise<void>;
  /** One RunStep message: new input data by fn's parameter names. */
  run(inputs?: Record<string, Tensor | TensorData | NestedArray>): Promise<this>;
  outputs(): Promise<TensorData[]>;
  lossValue(): Promise<number>;
  release(): Promise<void>;
}

/** Traces fn(...args) once into a step the daemon compiles; Tensor arguments are the per-run inputs. */
export declare function compileStep<A extends unknown[]>(
  fn: (...args: A) => Tensor | Tensor[] | void | Promise<Tensor | Tensor[] | void>, ...args: A): Promise<CompiledStep>;

/** tinygrad's TinyJit: the first call runs fn, the second captures it, later calls are one RunStep each.
 * Inputs are the Tensor arguments (and Tensors directly inside array/object arguments); state is what
 * fn assigns or steps, reached as arguments or through closures. Results come back as new Tensors. */
export interface JitFunction<A extends unknown[], R> {
  (...args: A): Promise<R>;
  /** Forget the capture: the next call runs eagerly, the one after captures again. */
  reset(): Promise<void>;
  /** The compiled step once captured (at the second call). */
  readonly captured: CompiledStep | null;
}
export declare function jit<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>): JitFunction<A, Awaited<R>>;

export interface ConnectOptions {
  /** 'host:port' or 'unix:/path' (gRPC), or 'http(s)://host:port' (the daemon's gRPC-Web port, --web-listen);
   * default POLYGRAD_ADDRESS, else a private embedded daemon */
  address?: string;
  /** default POLYGRAD_TOKEN */
  token?: string;
  /** a PEM file or its contents; default POLYGRAD_TLS_CA */
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  /** seconds; default POLYGRAD_CONNECT_TIMEOUT or 30 */
  connectTimeout?: number;
  /** commands sent and not yet answered before the next waits; default POLYGRAD_MAX_IN_FLIGHT or 8 */
  maxInFlight?: number;
}

export interface Connection {
  readonly address: string;
  readonly sessionId: string;
  readonly info: { version: string; devices: Array<{ name: string; available: boolean; detail: string }>; [k: string]: unknown };
  readonly device: string;
  /** commands sent on the session's stream whose answers are not applied yet */
  readonly outstanding: number;
  download(handle: string): Promise<{ dtype: number; shape: number[]; data: Uint8Array }>;
  release(nodeIds?: number[], handles?: string[]): Promise<unknown>;
}

export declare function connect(options?: ConnectOptions): Promise<Connection>;
export declare function close(): Promise<void>;
/** Waits until the daemon has run everything sent (realize(), optimizer steps and releases return
 * once sent); rejects with the first error among it. */
export declare function synchronize(): Promise<void>;
/** Client graph counters, and under `realized` the daemon's RealizeStats summed over every realize answered so far. */
export declare function graphStats(): { liveNodes: number; sentLive: number; pendingRelease: number; pendingHandles: number; nextId: number; requests: number; awaited: number;
  realized: { kernels: number; compiled: number; cacheHits: number; seconds: number } };
export declare function flushReleases(): Promise<void>;

export declare class PolygradError extends Error {
  /** the gRPC status name ('INVALID_ARGUMENT', ...), or null for an error found by the client */
  readonly code: string | null;
  /** the daemon's message */
  readonly details: string;
}
export declare class PolygradConnectionError extends PolygradError {}
export declare class PolygradInvalidArgument extends PolygradError {}
export declare class PolygradNotFound extends PolygradError {}
export declare class PolygradResourceExhausted extends PolygradError {}
export declare class PolygradUnauthenticated extends PolygradError {}
export declare class PolygradPermissionDenied extends PolygradError {}
export declare class PolygradTimeout extends PolygradError {}
export declare class PolygradUnimplemented extends PolygradError {}
/** A call a captured jit cannot replay (other input shapes or dtypes), or a function it cannot capture. */
export declare class JitError extends PolygradError {}

declare const polygrad: {
  Tensor: typeof Tensor; dtypes: typeof dtypes; nn: typeof nn; compileStep: typeof compileStep; jit: typeof jit; connect: typeof connect;
  close: typeof close; synchronize: typeof synchronize; PolygradError: typeof PolygradError;
};
export default polygrad;
