import type { KvSubscriberStatus } from '../../kv-events/kv-event-subscriber.js';

/**
 * The checks of `motor doctor` (issue 17 item 4) as pure functions: each takes what was observed of
 * one instance and returns a verdict, one line of detail and, on drift, one line saying what to change.
 * Gathering the observations (engine probes, the KV event index) is doctor.ts's job.
 */

/**
 * `unknown`: the check applies but could not decide (no data yet, a probe failed). `skipped`: the check
 * does not apply to this instance (an optional feature it does not use), with why: never drift.
 */
export type Verdict = 'ok' | 'drift' | 'unknown' | 'skipped';

export const CHECK_NAMES = [
  'tokenizer',
  'chat_template',
  'block_size',
  'block_hashes',
  'event_stream',
  'cached_tokens',
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

export interface CheckResult {
  check: CheckName;
  verdict: Verdict;
  detail: string;
  /** What to change (drift only; null otherwise). */
  fix: string | null;
}

const ok = (check: CheckName, detail: string): CheckResult => ({ check, verdict: 'ok', detail, fix: null });
const unknown = (check: CheckName, detail: string): CheckResult => ({
  check,
  verdict: 'unknown',
  detail,
  fix: null,
});
export const skipped = (check: CheckName, why: string): CheckResult => ({
  check,
  verdict: 'skipped',
  detail: why,
  fix: null,
});
const drift = (check: CheckName, detail: string, fix: string): CheckResult => ({
  check,
  verdict: 'drift',
  detail,
  fix,
});

/** What the engine said about a probe's tokens: its token ids (a tokenize route), or only a count. */
export type EngineTokens =
  { tokens: readonly number[]; via: string } | { count: number; via: string } | { error: string };

/** Where two token id lists first differ (-1: equal). */
export function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/**
 * Motor's tokens of a probe against the engine's. `check` says which: `tokenizer` (a plain prompt:
 * the tokenizer alone) or `chat_template` (a conversation: template and tokenizer). `group` and
 * `tokenizerPath` name what to change.
 */
export function tokensCheck(
  check: 'tokenizer' | 'chat_template',
  motor: ArrayLike<number> | { error: string },
  engine: EngineTokens,
  where: { group: string; tokenizerPath: string },
): CheckResult {
  if ('error' in motor) return unknown(check, `Motor could not tokenise the probe: ${motor.error}`);
  if ('error' in engine) return unknown(check, engine.error);
  const fix =
    check === 'tokenizer'
      ? `point kvHash.groups '${where.group}' tokenizer.path (now ${where.tokenizerPath}) at the tokenizer.json the engine loads`
      : `give kvHash.groups '${where.group}' the engine's chat template: the tokenizer_config.json / chat_template.jinja in ${where.tokenizerPath} must be the ones the engine uses (or drop the engine's --chat-template)`;
  if ('count' in engine) {
    if (engine.count === motor.length)
      return ok(check, `${motor.length} tokens, as the engine counts (${engine.via}; ids not compared)`);
    return drift(
      check,
      `Motor counts ${motor.length} tokens, the engine ${engine.count} (${engine.via})`,
      fix,
    );
  }
  const at = firstDifference(motor, engine.tokens);
  if (at < 0) return ok(check, `${motor.length} tokens, identical to the engine's (${engine.via})`);
  return drift(
    check,
    `Motor ${motor.length} tokens, engine ${engine.tokens.length} (${engine.via}); first difference at token ${at}: ` +
      `Motor ${String(motor[at] ?? '(end)')}, engine ${String(engine.tokens[at] ?? '(end)')}`,
    fix,
  );
}

/** The engine's block size as its KV events (BlockStored `block_size`) or its metrics tell it. */
export function blockSizeCheck(
  configured: number,
  seen: { events: number | null; metrics: number | null },
  group: string,
): CheckResult {
  const engine = seen.events ?? seen.metrics;
  if (engine === null)
    return unknown('block_size', 'no BlockStored event yet and no vllm:cache_config_info block_size label');
  const via = seen.events !== null ? 'BlockStored events' : 'vllm:cache_config_info';
  if (engine === configured) return ok('block_size', `${engine} tokens per block (${via})`);
  return drift(
    'block_size',
    `Motor hashes ${configured}-token blocks, the engine ${engine} (${via})`,
    `set kvHash.groups '${group}' blockHash.blockSize to ${engine} (the engine's --block-size)`,
  );
}

/** What became of a probe prompt's blocks in the KV event index. */
export interface HashProbe {
  /** The engine published the blocks Motor predicted for the probe. */
  found: boolean;
  /** Other settings under which the engine's blocks were found (a sure fix), if any. */
  matchedWith: { algo: string; blockSize: number } | null;
  /** Batches with stored blocks that arrived from the engine after the probe was sent. */
  batchesAfterProbe: number;
  /** The probe request failed (no verdict possible). */
  error?: string;
  /** `prefix_caching_hash_algo` of the engine's `vllm:cache_config_info`, when it has one. */
  engineAlgo?: string | null;
}

export function blockHashesCheck(
  probe: HashProbe,
  configured: { algo: string; blockSize: number; seed: string },
  group: string,
): CheckResult {
  if (probe.error !== undefined) return unknown('block_hashes', `probe failed: ${probe.error}`);
  const settings = `${configured.algo}, ${configured.blockSize}-token blocks, seed '${configured.seed}'`;
  if (probe.found)
    return ok('block_hashes', `the engine published the probe's blocks as predicted (${settings})`);
  if (probe.matchedWith)
    return drift(
      'block_hashes',
      `the engine's blocks match ${probe.matchedWith.algo} with ${probe.matchedWith.blockSize}-token blocks, not ${settings}`,
      `set kvHash.groups '${group}' blockHash.algo to ${probe.matchedWith.algo} and blockSize to ${probe.matchedWith.blockSize}`,
    );
  if (probe.batchesAfterProbe === 0)
    return unknown(
      'block_hashes',
      'no KV event batch arrived after the probe (stream down or engine not caching)',
    );
  const told =
    probe.engineAlgo != null && probe.engineAlgo !== configured.algo
      ? `; the engine's vllm:cache_config_info says prefix_caching_hash_algo=${probe.engineAlgo}`
      : '';
  return drift(
    'block_hashes',
    `the engine published blocks for the probe, none with the hashes Motor computes (${settings})${told}`,
    `set kvHash.groups '${group}' blockHash.seed to the engine's PYTHONHASHSEED and algo to its --prefix-caching-hash-algo`,
  );
}

/** Whether the instance's KV event stream is up, recent and without unrepaired gaps. */
export function eventStreamCheck(
  status: KvSubscriberStatus | undefined,
  nowMs: number,
  instance: string,
): CheckResult {
  if (status === undefined)
    return drift(
      'event_stream',
      'Motor does not subscribe to this instance’s KV events',
      `set instances '${instance}' kvEvents.endpoint to the engine's --kv-events-config endpoint`,
    );
  if (status.error !== null)
    return drift(
      'event_stream',
      `stream failed: ${status.error}`,
      `check that instances '${instance}' kvEvents.endpoint is the engine's publisher and reachable`,
    );
  if (status.lastSeq === null || status.lastBatchAtMs === null)
    return unknown('event_stream', 'subscribed; no batch received yet (the engine has cached nothing since)');
  const age = Math.round((nowMs - status.lastBatchAtMs) / 1000);
  const detail =
    `last batch ${age} s ago (seq ${status.lastSeq}), ${status.batches} batches, ` +
    `${status.gaps} gaps, ${status.resyncs} resyncs, lag ${status.lagMs ?? '?'} ms`;
  // Joining a running engine's stream is one gap (its first batch has seq > 0) and, without a replay
  // buffer reaching back to 0, one resync: expected. More than that is batches lost on the way.
  if (Math.min(status.gaps, status.resyncs) > 1)
    return drift(
      'event_stream',
      detail,
      `missed batches were not replayed: set instances '${instance}' kvEvents.replayEndpoint to the engine's replay_endpoint`,
    );
  return ok('event_stream', detail);
}

/** One routed request: the cached tokens predicted for its instance and those the engine reported. */
export interface CachedTokensSample {
  predicted: number;
  reported: number;
}

/** Share of recent requests whose prediction must be exact (issue 17: ≥ 99 %). */
export const EXACT_SHARE = 0.99;

export function cachedTokensCheck(samples: readonly CachedTokensSample[], group: string): CheckResult {
  if (samples.length === 0)
    return unknown('cached_tokens', 'no precisely routed request with reported cached_tokens yet');
  let exact = 0;
  let miss: CachedTokensSample | null = null;
  for (const s of samples) {
    if (s.predicted === s.reported) exact++;
    else miss ??= s;
  }
  const detail = `${exact} of ${samples.length} recent requests predicted exactly`;
  if (exact / samples.length >= EXACT_SHARE) return ok('cached_tokens', detail);
  return drift(
    'cached_tokens',
    `${detail} (e.g. predicted ${miss!.predicted}, reported ${miss!.reported})`,
    `the engine does not cache what Motor predicts: fix the drift above, else check kvHash.groups '${group}' against the engine (LoRA, cache_salt, multimodal prompts are not predicted)`,
  );
}
