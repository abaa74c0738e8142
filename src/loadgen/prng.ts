/**
 * Small seeded PRNG helpers for reproducible workloads and arrival processes. `Prng` is mulberry32
 * (32-bit state, fast, good enough for load shapes); `deriveSeed` mixes several integers into one
 * seed with a splitmix-style finalizer so request `i` can get its own stream independent of order.
 */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max] (inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Exponentially distributed with the given rate (mean 1/rate): Poisson inter-arrival gaps. */
  exponential(rate: number): number {
    return -Math.log(1 - this.next()) / rate;
  }
}

/** Mixes integers into a 32-bit seed (murmur3 finalizer per step); stable across runs and platforms. */
export function deriveSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) {
    h = Math.imul(h ^ (p >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    // Also fold the high bits of large (up to 2^53) integers.
    const hi = Math.floor(p / 4294967296) >>> 0;
    if (hi !== 0) h = Math.imul(h ^ hi, 0x27d4eb2f) ^ (h >>> 15);
  }
  return h >>> 0;
}
