import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import type { ClientRequest } from '../src/coordinator/internal-request/client-request.js';
import { startCoordinator, type RunningCoordinator } from '../src/coordinator/coordinator.js';
import { KvPredictor } from '../src/coordinator/kv-routing/kv-prediction.js';
import { PromptBlockKeys } from '../src/coordinator/kv-routing/prompt-block-keys.js';
import type { KvEventsHub } from '../src/kv-events/kv-events-hub.js';
import { QWEN3_DIR } from '../src/model-tokenizer/testing/index.js';
import type { KvEventsPublisher } from '../src/simulator/kv-events-publisher.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { post } from '../src/simulator/testing/index.js';

/**
 * Issue 17's Done-when, scaled to this machine: two union simulators tokenise with Qwen3 and hash
 * blocks the vLLM way (`--tokenizer`), publish KV events, and evict (32-block caches, full by the end);
 * each starts with a system prompt the coordinators never routed (another router's traffic); two coordinators
 * subscribe to both and route with `precise-prefix`, taking turns as a round-robin balancer would.
 * Per request: the cached tokens predicted from each coordinator's own index equal the engine's
 * reported `cached_tokens` (≥ 99 %), the two coordinators predict the same, and the request lands on
 * an instance predicted to hold the longest prefix. Each request waits until both indexes applied
 * every batch published so far (the prediction is exact for the state the events describe; events
 * in flight are a race no router avoids). With `prefix-affinity` instead the route check fails on the
 * first request (the system prompt's holder is unknown to routed history).
 */

const BLOCK = 16;
const MODEL = 'qwen3';
const log = createLogger('precise-prefix-test', 'silent');

let sims: RunningSimulator[];
let coordinators: RunningCoordinator[];
let predictors: KvPredictor[];
let keys: PromptBlockKeys;

/** Generation requests each simulator has handled. */
const handled = [0, 0];
const publisher = (s: RunningSimulator) => s.core.cache.listener as KvEventsPublisher;
const ids = ['e0', 'e1'];

/** Resolves once `hub` has applied every batch both simulators published (one event-loop turn per check). */
async function synced(hub: KvEventsHub): Promise<void> {
  for (let turn = 0; turn < 20_000; turn++) {
    const st = new Map(hub.status().map((s) => [s.instance, s.lastSeq]));
    if (sims.every((s, i) => (st.get(ids[i]!) ?? -1n) === publisher(s).published - 1n)) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error('KV event index never caught up');
}

beforeAll(async () => {
  sims = await Promise.all(
    ids.map(() =>
      startSimulator(
        {
          timeScale: 0,
          model: MODEL,
          blockSize: BLOCK,
          kvBlocks: 32,
          tokenizer: QWEN3_DIR,
          hashSeed: '0',
          kvEventsEndpoint: 'tcp://127.0.0.1:*',
        },
        log,
      ),
    ),
  );
  const config = validateCoordinatorConfig({
    server: { port: 0 },
    instances: sims.map((s, i) => ({
      id: ids[i],
      url: s.url,
      role: 'union',
      mode: 'direct',
      models: [MODEL],
      kvEvents: { endpoint: s.kvEvents!.endpoint },
    })),
    kvHash: {
      groups: [
        {
          name: 'qwen3',
          models: [MODEL],
          tokenizer: { path: QWEN3_DIR },
          blockHash: { algo: 'sha256', blockSize: BLOCK, seed: '0' },
        },
      ],
    },
    scheduling: { union: { scorers: [{ type: 'precise-prefix' }], picker: { type: 'max-score' } } },
    health: { intervalMs: 0 },
    observability: { accessLog: false },
    management: { port: null },
  });
  coordinators = [await startCoordinator(config, log), await startCoordinator(config, log)];
  keys = await PromptBlockKeys.start(config.kvHash.groups, log);
  predictors = coordinators.map((c) => new KvPredictor(keys, c.kvEvents!, log));
  // ZeroMQ subscriptions take effect asynchronously: store probes until every hub has a batch of each.
  for (let probe = 0; probe < 500; probe++) {
    const joined = coordinators.every((c) => c.kvEvents!.status().every((s) => s.lastSeq !== null));
    if (joined) break;
    const prompt = Array.from({ length: BLOCK + 1 }, (_, k) => 50_000 + 100 * probe + k);
    await Promise.all(
      sims.map((s) => post(s.url, '/v1/completions', { model: MODEL, prompt, max_tokens: 1 })),
    );
  }
  for (const s of sims) s.core.cache.clear();
  sims.forEach((s, i) => {
    const handle = s.core.handle.bind(s.core);
    s.core.handle = (...args) => {
      handled[i]!++;
      return handle(...args);
    };
  });
  await Promise.all(coordinators.map((c) => synced(c.kvEvents!)));
}, 120_000);

afterAll(async () => {
  await keys?.close();
  for (const c of coordinators ?? []) await c.close();
  for (const s of sims ?? []) await s.close();
});

describe('precise prefix routing end to end (simulators publishing vLLM block hashes)', () => {
  it('predicts cached_tokens exactly and two coordinators agree on the route', async () => {
    // Two system prompts, each already cached on one engine by traffic Motor never saw (another router).
    const systems = ['cloud storage', 'payroll'].map((product) => ({
      role: 'system',
      content: `You are a support agent for a ${product} product. Answer briefly. `.repeat(10),
    }));
    await post(sims[1]!.url, '/v1/chat/completions', { model: MODEL, messages: [systems[0]], max_tokens: 1 });
    await post(sims[0]!.url, '/v1/chat/completions', { model: MODEL, messages: [systems[1]], max_tokens: 1 });
    const conversations: Array<Array<{ role: string; content: string }>> = Array.from(
      { length: 6 },
      (_, c) => [systems[c % 2]!],
    );
    let exact = 0;
    let total = 0;
    let hits = 0;
    for (let turn = 0; turn < 4; turn++) {
      for (let c = 0; c < conversations.length; c++) {
        const messages = conversations[c]!;
        messages.push({ role: 'user', content: `Customer ${c}, question ${turn}: how do I restore a file?` });
        const body = { model: MODEL, messages, max_tokens: 8 };
        const client = { kind: 'chat', model: MODEL, body, stream: false } as unknown as ClientRequest;
        await Promise.all(coordinators.map((co) => synced(co.kvEvents!)));
        const [a, b] = await Promise.all(predictors.map((p) => p.predict(client)));
        expect(b).toEqual(a);
        const before = [...handled];
        const r = await post(coordinators[total % 2]!.url, '/v1/chat/completions', body);
        expect(r.status).toBe(200);
        const served = ids[handled.findIndex((n, i) => n !== before[i])]!;
        const reported = r.json.usage.prompt_tokens_details.cached_tokens as number;
        const predicted = a!.cachedTokens.get(served);
        if (predicted === reported) exact++;
        if (reported > 0) hits++;
        total++;
        const best = Math.max(...a!.cachedTokens.values());
        expect(a!.cachedTokens.get(served)).toBe(best);
        expect(r.json.usage.prompt_tokens).toBe(a!.promptTokens);
        messages.push({ role: 'assistant', content: r.json.choices[0].message.content as string });
      }
    }
    expect(exact / total).toBeGreaterThanOrEqual(0.99);
    expect(hits).toBeGreaterThan(total / 2);
  }, 120_000);
});
