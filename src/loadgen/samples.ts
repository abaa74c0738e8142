/**
 * A growable Float64Array of samples (latencies in ms): appending is allocation-free except when
 * the capacity doubles, so per-token ITL recording does not create garbage.
 */
export class Samples {
  private data: Float64Array;
  private n = 0;

  constructor(initialCapacity = 1024) {
    this.data = new Float64Array(Math.max(1, initialCapacity));
  }

  get length(): number {
    return this.n;
  }

  push(v: number): void {
    if (this.n === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.n++] = v;
  }

  pushAll(other: Samples): void {
    for (let i = 0; i < other.n; i++) this.push(other.data[i]!);
  }

  /** A sorted copy (numeric order) of the samples. */
  sorted(): Float64Array {
    return this.data.slice(0, this.n).sort();
  }

  sum(): number {
    let s = 0;
    for (let i = 0; i < this.n; i++) s += this.data[i]!;
    return s;
  }
}

/**
 * The p-th percentile (0–100) of ascending `sorted` values with linear interpolation between the
 * closest ranks (numpy's default "linear" method). Empty input → NaN.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  if (p <= 0) return sorted[0]!;
  if (p >= 100) return sorted[n - 1]!;
  const rank = (p / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo]!;
  if (lo === hi) return a;
  return a + (sorted[hi]! - a) * (rank - lo);
}

export interface Distribution {
  count: number;
  mean: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Count, mean, min, p50/p90/p99, max of the samples (NaN fields when empty). */
export function distribution(samples: Samples): Distribution {
  const s = samples.sorted();
  const n = s.length;
  return {
    count: n,
    mean: n ? samples.sum() / n : NaN,
    min: n ? s[0]! : NaN,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    max: n ? s[n - 1]! : NaN,
  };
}
