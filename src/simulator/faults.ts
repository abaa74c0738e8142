import { z } from 'zod';
import { prng } from './tokens.js';

/**
 * Fault injection, set by flags at start-up and at run time through `/debug/faults`.
 * Faults apply to the inference routes only (`/v1/chat/completions`, `/v1/completions`), optionally
 * narrowed by `match_path` and `match_kv` ("with": requests carrying kv_transfer_params or
 * bootstrap_*; "without": the others).
 */
export const FaultConfigSchema = z.strictObject({
  /** Fraction of matching requests that fail at once with `error_status` (seeded, deterministic). */
  error_rate: z.number().min(0).max(1),
  /** Fail every Nth matching request (0 = off). */
  error_every: z.number().int().min(0),
  /** Fail the next N matching requests, then stop (counts down; 0 = off). */
  error_next: z.number().int().min(0),
  error_status: z.union([z.literal(400), z.literal(429), z.literal(500), z.literal(503)]),
  /** Seed of the error_rate PRNG; setting faults restarts the sequence. */
  seed: z.number().int(),
  /** Hang after admission, before the first token: ms (wall clock), -1 = until the client goes away. */
  hang_before_first_token_ms: z.number().int().min(-1),
  /** Kill the connection after N output tokens (stream: mid-stream; non-stream: no response). -1 = off. */
  die_after_tokens: z.number().int().min(-1),
  /**
   * vllm-ascend decode only: the RecomputeScheduler evicts the request after N output tokens, which
   * then ends with finish_reason "stop", stop_reason "recomputed" (engine-profiles.ts `recompute`). -1 = off.
   */
  recompute_after: z.number().int().min(-1),
  /** Multiplies every decode step (≥ 1 slows down). */
  slow_decode_factor: z.number().positive(),
  /**
   * The next N decode/single requests (prefill legs never count) fail the way the engine reports a
   * KV-transfer/generation failure: streaming ones answer 200 and then an error event first (see
   * generation-error.ts), non-streaming ones the engine's 500. Counts down; 0 = off.
   */
  stream_error_first: z.number().int().min(0),
  /**
   * A P/D decode that reads the handed-over KV and then recomputes the prompt all the same (the
   * silent P/D failure): it reports only its local prefix-cache hit as cached tokens.
   */
  ignore_remote_kv: z.boolean(),
  /** Keys removed from a handoff prefill's kv_transfer_params (an engine release Motor misreads). */
  drop_kv_params: z.array(z.string().min(1)),
  /** Close accepted sockets at once: N = the next N connections, -1 = all, 0 = off. */
  refuse_connections: z.number().int().min(-1),
  match_path: z.string().nullable(),
  match_kv: z.enum(['any', 'with', 'without']),
});

export type FaultConfig = z.infer<typeof FaultConfigSchema>;

export const NO_FAULTS: Readonly<FaultConfig> = Object.freeze({
  error_rate: 0,
  error_every: 0,
  error_next: 0,
  error_status: 500,
  seed: 1,
  hang_before_first_token_ms: 0,
  die_after_tokens: -1,
  recompute_after: -1,
  slow_decode_factor: 1,
  stream_error_first: 0,
  ignore_remote_kv: false,
  drop_kv_params: [],
  refuse_connections: 0,
  match_path: null,
  match_kv: 'any',
});

export const FaultPatchSchema = FaultConfigSchema.partial();

export interface ActiveFaults {
  errorStatus: number | null;
  hangMs: number;
  dieAfterTokens: number;
  recomputeAfter: number;
  slowFactor: number;
  /** Answer with the engine's generation error (after the 200 when streaming). */
  streamErrorFirst: boolean;
  ignoreRemoteKv: boolean;
  dropKvParams: readonly string[];
}

const NONE: ActiveFaults = Object.freeze({
  errorStatus: null,
  hangMs: 0,
  dieAfterTokens: -1,
  recomputeAfter: -1,
  slowFactor: 1,
  streamErrorFirst: false,
  ignoreRemoteKv: false,
  dropKvParams: [],
});

export class Faults {
  private cfg: FaultConfig = { ...NO_FAULTS };
  private rand = prng(1);
  private matched = 0;
  /** Cheap check on the hot path: false when nothing is configured. */
  private any = false;

  constructor(initial: Partial<FaultConfig> = {}) {
    this.set(initial);
  }

  get config(): FaultConfig {
    return { ...this.cfg };
  }

  set(patch: Partial<FaultConfig>): FaultConfig {
    this.cfg = FaultConfigSchema.parse({ ...this.cfg, ...patch });
    this.rand = prng(this.cfg.seed);
    this.matched = 0;
    const c = this.cfg;
    this.any =
      c.error_rate > 0 ||
      c.error_every > 0 ||
      c.error_next > 0 ||
      c.hang_before_first_token_ms !== 0 ||
      c.die_after_tokens >= 0 ||
      c.recompute_after >= 0 ||
      c.slow_decode_factor !== 1 ||
      c.stream_error_first > 0 ||
      c.ignore_remote_kv ||
      c.drop_kv_params.length > 0;
    return this.config;
  }

  reset(): FaultConfig {
    return this.set({ ...NO_FAULTS });
  }

  /** Called for every accepted socket: true = destroy it. */
  refuseConnection(): boolean {
    const n = this.cfg.refuse_connections;
    if (n === 0) return false;
    if (n > 0) this.cfg.refuse_connections = n - 1;
    return true;
  }

  /** Decides the faults for one inference request (advances the deterministic counters). */
  forRequest(path: string, hasKv: boolean, prefillLeg = false): ActiveFaults {
    if (!this.any) return NONE;
    const c = this.cfg;
    if (c.match_path !== null && c.match_path !== path) return NONE;
    if (c.match_kv === 'with' && !hasKv) return NONE;
    if (c.match_kv === 'without' && hasKv) return NONE;
    this.matched++;
    let fail = false;
    if (c.error_next > 0) {
      c.error_next--;
      fail = true;
    }
    if (c.error_every > 0 && this.matched % c.error_every === 0) fail = true;
    if (c.error_rate > 0 && this.rand() < c.error_rate) fail = true;
    let streamErrorFirst = false;
    if (!fail && !prefillLeg && c.stream_error_first > 0) {
      c.stream_error_first--;
      streamErrorFirst = true;
    }
    return {
      errorStatus: fail ? c.error_status : null,
      hangMs: c.hang_before_first_token_ms,
      dieAfterTokens: c.die_after_tokens,
      recomputeAfter: c.recompute_after,
      slowFactor: c.slow_decode_factor,
      streamErrorFirst,
      ignoreRemoteKv: c.ignore_remote_kv,
      dropKvParams: c.drop_kv_params,
    };
  }
}
