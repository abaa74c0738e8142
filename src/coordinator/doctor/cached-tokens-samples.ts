import type { CachedTokensSample } from './doctor-checks.js';

/** Samples kept per instance by default. */
export const SAMPLES_PER_INSTANCE = 128;
/** Instances tracked at most (registry churn must not grow it without bound). */
const MAX_INSTANCES = 1024;

/**
 * Per instance, the last few (predicted, reported) cached-token pairs of precisely routed requests,
 * for `motor doctor`'s `cached_tokens` check. Bounded: a fixed ring per instance, a bounded number
 * of instances (the least recently recorded one is dropped). One record per request, not per token.
 */
export class CachedTokensSamples {
  private readonly rings = new Map<
    string,
    { at: number; predicted: Int32Array; reported: Int32Array; n: number }
  >();

  constructor(private readonly perInstance = SAMPLES_PER_INSTANCE) {}

  record(instance: string, predicted: number, reported: number): void {
    let ring = this.rings.get(instance);
    if (ring === undefined) {
      if (this.rings.size >= MAX_INSTANCES) this.rings.delete(this.rings.keys().next().value!);
      ring = {
        at: 0,
        predicted: new Int32Array(this.perInstance),
        reported: new Int32Array(this.perInstance),
        n: 0,
      };
    } else this.rings.delete(instance); // re-inserted: most recently recorded last
    this.rings.set(instance, ring);
    ring.predicted[ring.at] = predicted;
    ring.reported[ring.at] = reported;
    ring.at = (ring.at + 1) % this.perInstance;
    ring.n = Math.min(ring.n + 1, this.perInstance);
  }

  /** The instance's samples, oldest first. */
  of(instance: string): CachedTokensSample[] {
    const ring = this.rings.get(instance);
    if (ring === undefined) return [];
    const out: CachedTokensSample[] = [];
    const start = (ring.at - ring.n + this.perInstance) % this.perInstance;
    for (let k = 0; k < ring.n; k++) {
      const i = (start + k) % this.perInstance;
      out.push({ predicted: ring.predicted[i]!, reported: ring.reported[i]! });
    }
    return out;
  }
}

const MARK = Buffer.from('"cached_tokens":');

/**
 * `usage.prompt_tokens_details.cached_tokens` of an engine's JSON answer, read without parsing the
 * body (the relay forwards it as bytes): the integer after the last `"cached_tokens":`. Null when
 * absent or not an integer (`null`: the engine did not report it).
 */
export function reportedCachedTokens(body: Buffer): number | null {
  const at = body.lastIndexOf(MARK);
  if (at < 0) return null;
  let i = at + MARK.length;
  while (i < body.length && body[i] === 0x20) i++;
  let value = 0;
  const start = i;
  while (i < body.length && body[i]! >= 0x30 && body[i]! <= 0x39 && i - start < 15) {
    value = value * 10 + (body[i]! - 0x30);
    i++;
  }
  return i === start ? null : value;
}
