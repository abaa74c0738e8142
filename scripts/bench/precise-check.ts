/**
 * Offline references and prediction check of scripts/bench/precise-e2e.ts, both in the engines' own
 * blocks: prompts tokenised with the Qwen3 tokenizer and hashed as the simulators hash them
 * (PromptBlockKeys, the coordinator's own code).
 */
import { createLogger } from '../../src/common/logger.js';
import { validateCoordinatorConfig } from '../../src/config/coordinator-config.js';
import type { ClientRequest } from '../../src/coordinator/internal-request/client-request.js';
import { KvPredictor } from '../../src/coordinator/kv-routing/kv-prediction.js';
import { PromptBlockKeys } from '../../src/coordinator/kv-routing/prompt-block-keys.js';
import { KvEventsHub } from '../../src/kv-events/kv-events-hub.js';
import type { TraceRecord } from '../../src/loadgen/mooncake-trace.js';
import { cacheReferences, type ReferenceOptions } from '../../src/loadgen/cache-references.js';
import type { BenchRequest } from '../../src/loadgen/workloads.js';
import { BLOCK, KV_HASH, MODEL, type Fleet } from './precise-fleet.js';

const log = createLogger('precise-bench', 'warn');

export async function startBlockKeys(): Promise<PromptBlockKeys> {
  const groups = validateCoordinatorConfig({ kvHash: KV_HASH }).kvHash.groups;
  return PromptBlockKeys.start(groups, log);
}

const clientOf = (r: BenchRequest): ClientRequest =>
  ({
    kind: 'chat',
    model: MODEL,
    body: { model: MODEL, messages: r.messages, max_tokens: r.maxTokens },
    stream: false,
  }) as unknown as ClientRequest;

/** Offline hit rates of the same requests (src/loadgen/cache-references.ts), as fractions. */
export interface EngineReferences {
  infinite: number;
  pooledLru: number;
  earliestFinish: number;
}

/**
 * The references (infinite cache, pooled LRU of the fleet, earliest finish) over the requests in
 * order, in engine blocks: each full 16-token block of a prompt is one block (its chained vLLM hash is
 * the id), divided by all prompt tokens. `arrivalsMs` are the requests' send times where the load
 * fixes them (a trace); a closed loop has none, and the earliest-finish reference then sees every
 * request at once (it spreads by queue alone). It ignores the engine's last-token recompute.
 */
export async function engineReferences(
  keys: PromptBlockKeys,
  requests: readonly BenchRequest[],
  fleet: Pick<ReferenceOptions, 'instances' | 'capacityBlocks' | 'prefillMsPerToken'>,
  arrivalsMs?: readonly number[],
): Promise<EngineReferences> {
  const idOf = new Map<bigint, number>();
  const records: TraceRecord[] = [];
  let promptTokens = 0;
  for (const [i, r] of requests.entries()) {
    const p = (await keys.prompts(clientOf(r))).get(KV_HASH.groups[0]!.name);
    if (!p) throw new Error('the references could not tokenise a prompt');
    promptTokens += p.promptTokens;
    const hashIds = Array.from(p.blockKeys, (k) => {
      let id = idOf.get(k);
      if (id === undefined) idOf.set(k, (id = idOf.size));
      return id;
    });
    if (hashIds.length > 0)
      records.push({
        timestampMs: arrivalsMs?.[i] ?? 0,
        inputLength: hashIds.length * BLOCK,
        outputLength: 0,
        hashIds,
      });
  }
  const refs = cacheReferences(records, { ...fleet, blockTokens: BLOCK });
  const rate = (hitTokens: number) => hitTokens / promptTokens;
  return {
    infinite: rate(refs.infinite.hitTokens),
    pooledLru: rate(refs.pooledLru.hitTokens),
    earliestFinish: rate(refs.earliestFinish.hitTokens),
  };
}

/** The script's own replica of a coordinator's KV event index, subscribed from the fleet's start. */
export function watchEvents(fleet: Fleet): KvEventsHub {
  const hub = new KvEventsHub({});
  hub.sync(
    fleet.prefillEvents.map((p) => ({
      id: p.id,
      kvEvents: { endpoint: p.endpoint, replayEndpoint: p.replayEndpoint, topic: '' },
    })),
  );
  return hub;
}

interface DashboardState {
  totals: { requests: number };
  recent: Array<{ legs: Array<{ role: string; instance: string }> }>;
  kvEvents: { instances: Array<{ instance: string; lastSeq: string | null }> } | null;
}

async function dashboard(url: string): Promise<DashboardState> {
  const res = await fetch(`${url}/dashboard/api/state`);
  return (await res.json()) as DashboardState;
}

const seqs = (pairs: Array<[string, string | null]>) =>
  JSON.stringify(pairs.sort(([a], [b]) => a.localeCompare(b)));

/**
 * Waits until the script's index and every coordinator's have applied the same last batch of every
 * prefill, unchanged over three polls 5 ms apart (the engines are idle between the check's requests:
 * nothing more is coming). Bounded: 10 s.
 */
async function quiesced(fleet: Fleet, hub: KvEventsHub): Promise<void> {
  let stable = 0;
  let last = '';
  for (let i = 0; i < 2000 && stable < 3; i++) {
    const mine = seqs(hub.status().map((s) => [s.instance, s.lastSeq === null ? null : String(s.lastSeq)]));
    const theirs = await Promise.all(
      fleet.coordinators.map(async (c) =>
        seqs((await dashboard(c)).kvEvents?.instances.map((s) => [s.instance, s.lastSeq]) ?? []),
      ),
    );
    const same = theirs.every((t) => t === mine);
    stable = same && mine === last ? stable + 1 : 0;
    last = mine;
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface PredictionCheck {
  requests: number;
  /** Requests whose serving prefill reported exactly the cached tokens predicted for it. */
  exact: number;
  /** Requests routed to an instance predicted to hold the longest prefix. */
  longest: number;
  /** Requests that hit the cache at all. */
  hits: number;
}

/**
 * Sends `requests` one at a time, alternating the coordinators as the round-robin balancer does; before
 * each, predicts every prefill's cached tokens from the script's own index (the coordinators run the
 * same code on the same events), then compares the prediction for the prefill that served it (the
 * coordinator's dashboard: its newest request's prefill leg) with the engine's `cached_tokens`.
 */
export async function predictionCheck(
  fleet: Fleet,
  hub: KvEventsHub,
  keys: PromptBlockKeys,
  requests: readonly BenchRequest[],
): Promise<PredictionCheck> {
  const predictor = new KvPredictor(keys, hub, log);
  const out: PredictionCheck = { requests: 0, exact: 0, longest: 0, hits: 0 };
  for (const [i, r] of requests.entries()) {
    const coordinator = fleet.coordinators[i % fleet.coordinators.length]!;
    await quiesced(fleet, hub);
    const predicted = await predictor.predict(clientOf(r));
    const before = (await dashboard(coordinator)).totals.requests;
    const res = await fetch(`${coordinator}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: r.messages, max_tokens: r.maxTokens }),
    });
    const body = (await res.json()) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
    if (res.status !== 200) throw new Error(`prediction check: request ${i} → ${res.status}`);
    const reported = body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    let state = await dashboard(coordinator);
    for (let k = 0; k < 200 && state.totals.requests <= before; k++) {
      await new Promise((r) => setTimeout(r, 5));
      state = await dashboard(coordinator);
    }
    const served = state.recent[0]?.legs.find((l) => l.role === 'prefill')?.instance;
    const mine = served === undefined ? undefined : predicted?.cachedTokens.get(served);
    out.requests++;
    if (mine === reported) out.exact++;
    if (mine !== undefined && mine === Math.max(...predicted!.cachedTokens.values())) out.longest++;
    if (reported > 0) out.hits++;
  }
  return out;
}
