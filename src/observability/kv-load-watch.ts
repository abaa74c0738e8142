import type { KvLoadVerdict } from '../engine-adapters/kv-load.js';

/** Verdicts kept per pair: the recent past only, so a fixed pair recovers within a window. */
export const KV_LOAD_WINDOW = 20;
/** A pair is degraded from this many decided verdicts on (one recompute is not a pattern)… */
export const KV_LOAD_MIN_SAMPLES = 3;
/** …when at least this share of them are `not_loaded`. */
export const KV_LOAD_DEGRADED_SHARE = 0.5;

/**
 * Per prefill/decode pair, the recent `kv_not_loaded` outcomes (a decode reporting far fewer cached
 * tokens than the prompt: it recomputed instead of reading the handed-over KV, kv-load.ts). A pair
 * past the share shows on `/ready` as degraded — not unready: its requests are still answered, only
 * at a prefill's cost twice. `unknown` verdicts (the engine does not report cached tokens) are not kept.
 */
export class KvLoadWatch {
  /** Per pair key: a ring of the last verdicts (true = not loaded). */
  private readonly pairs = new Map<string, { ring: boolean[]; next: number }>();

  record(prefillId: string, decodeId: string, verdict: KvLoadVerdict): void {
    if (verdict === 'unknown') return;
    const key = `${prefillId} → ${decodeId}`;
    let p = this.pairs.get(key);
    if (p === undefined) {
      p = { ring: [], next: 0 };
      this.pairs.set(key, p);
    }
    const notLoaded = verdict === 'not_loaded';
    if (p.ring.length < KV_LOAD_WINDOW) p.ring.push(notLoaded);
    else p.ring[p.next] = notLoaded;
    p.next = (p.next + 1) % KV_LOAD_WINDOW;
  }

  /** Degraded pairs (`<prefill> → <decode>`) with the likely cause, for `/ready`. */
  degraded(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [key, { ring }] of this.pairs) {
      if (ring.length < KV_LOAD_MIN_SAMPLES) continue;
      const bad = ring.filter(Boolean).length;
      if (bad / ring.length < KV_LOAD_DEGRADED_SHARE) continue;
      out[key] =
        `kv_not_loaded in ${bad} of the last ${ring.length} P/D requests: the decode recomputed the prompt ` +
        'instead of reading the KV handed over (likely cause: the decode cannot reach the prefill’s KV ' +
        'transfer address, or the two run different connectors or releases); run `motor verify`';
    }
    return out;
  }
}
