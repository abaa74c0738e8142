import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import type { ClientRequest } from '../src/coordinator/internal-request/client-request.js';
import { startCoordinator, type RunningCoordinator } from '../src/coordinator/coordinator.js';
import { KvPredictor } from '../src/coordinator/kv-routing/kv-prediction.js';
import { PromptBlockKeys } from '../src/coordinator/kv-routing/prompt-block-keys.js';
import type { KvEventsPublisher } from '../src/simulator/kv-events-publisher.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { http, idleLedger, post, sseEvents } from '../src/simulator/testing/index.js';

/**
 * Decode-first end to end (issue 17 item 5), in process: a vLLM prefill and decode simulator (NIXL
 * handoff, direct mode) behind a coordinator with `decodeFirst` on and `prefix-affinity` on the decode
 * profile (the approximate prediction: routed history records each pair's decode). The first turn of a
 * conversation is a P/D pair; the next turn repeats it and adds a short question, so the decode
 * instance holds most of it: it goes to the decode simulator alone, as a plain request, and the
 * simulator reports the prompt tokens it served from its own prefix cache.
 */

const MODEL = 'motor-sim-7b';
const log = createLogger('decode-first-test', 'silent');

let prefill: RunningSimulator;
let decode: RunningSimulator;
let coordinator: RunningCoordinator;

beforeAll(async () => {
  const start = (role: 'prefill' | 'decode') =>
    startSimulator({ role, timeScale: 0, model: MODEL, kvConnector: 'NixlConnector' }, log);
  [prefill, decode] = await Promise.all([start('prefill'), start('decode')]);
  const config = validateCoordinatorConfig({
    server: { port: 0 },
    instances: [
      {
        id: 'P',
        url: prefill.url,
        role: 'prefill',
        mode: 'direct',
        models: [MODEL],
        dispatchProfile: 'handoff',
      },
      {
        id: 'D',
        url: decode.url,
        role: 'decode',
        mode: 'direct',
        models: [MODEL],
        dispatchProfile: 'handoff',
      },
    ],
    scheduling: { decode: { scorers: [{ type: 'prefix-affinity' }] } },
    decodeFirst: { enabled: true, minCachedFraction: 0.8, maxUncachedTokens: 16 },
    health: { intervalMs: 0 },
    observability: { accessLog: false },
    management: { port: null },
  });
  coordinator = await startCoordinator(config, log);
}, 60_000);

afterAll(async () => {
  await coordinator?.close();
  await Promise.all([prefill?.close(), decode?.close()]);
});

/** Flows each simulator ran (its request ledger), oldest first. */
const flows = async (sim: RunningSimulator): Promise<string[]> =>
  (await idleLedger(sim.url)).finished.map((f) => f.flow);

describe('decode-first with simulators', () => {
  it('a repeated long conversation turn skips the prefill leg; the decode reports its cached tokens', async () => {
    const report = 'Summarise the attached quarterly report for the board, section by section. '.repeat(12);
    const messages = [{ role: 'user', content: report }];
    const first = await post(coordinator.url, '/v1/chat/completions', {
      model: MODEL,
      messages,
      max_tokens: 4,
    });
    expect(first.status).toBe(200);
    expect(await flows(prefill)).toEqual(['handoff_prefill']);
    expect(await flows(decode)).toEqual(['handoff_decode']);

    messages.push({ role: 'assistant', content: first.json.choices[0].message.content });
    messages.push({ role: 'user', content: 'And the risks?' });
    for (const stream of [false, true]) {
      const r = await post(coordinator.url, '/v1/chat/completions', {
        model: MODEL,
        messages,
        max_tokens: 4,
        stream,
        stream_options: stream ? { include_usage: true } : undefined,
      });
      expect(r.status).toBe(200);
      const usage = stream
        ? (
            sseEvents(r.text)
              .filter((e) => typeof e === 'object' && (e as { usage?: unknown }).usage)
              .at(-1) as {
              usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
            }
          ).usage
        : r.json.usage;
      // the decode engine's own prefix cache served most of the prompt (P/D would report the prefill's)
      expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0.8 * usage.prompt_tokens - 32);
    }
    expect(await flows(prefill)).toEqual(['handoff_prefill']);
    expect(await flows(decode)).toEqual(['handoff_decode', 'plain', 'plain']);
    const metrics = (await http(coordinator.url, 'GET', '/metrics')).text;
    expect(metrics).toMatch(/motor_decode_first_total\{outcome="prefill",source="approximate"\} 1/);
    expect(metrics).toMatch(/motor_decode_first_total\{outcome="cached",source="approximate"\} 2/);
  });
});

/**
 * The same with the precise prediction: the decode simulator tokenises with Qwen3, hashes blocks the
 * vLLM way and publishes KV events; the coordinator indexes them (no cache-aware scorer on decode).
 * The repeated turn goes decode-first, and the decode engine's reported cached tokens are what the
 * coordinator predicted from the events.
 */
describe('decode-first with the KV events prediction', () => {
  const QWEN = 'qwen3';
  let p: RunningSimulator;
  let d: RunningSimulator;
  let coord: RunningCoordinator;
  let keys: PromptBlockKeys;
  let predictor: KvPredictor;

  beforeAll(async () => {
    const { QWEN3_DIR } = await import('../src/model-tokenizer/testing/index.js');
    const sim = (role: 'prefill' | 'decode') =>
      startSimulator(
        {
          role,
          timeScale: 0,
          model: QWEN,
          kvConnector: 'NixlConnector',
          blockSize: 16,
          tokenizer: QWEN3_DIR,
          hashSeed: '0',
          ...(role === 'decode' ? { kvEventsEndpoint: 'tcp://127.0.0.1:*' } : {}),
        },
        log,
      );
    [p, d] = await Promise.all([sim('prefill'), sim('decode')]);
    const inst = (id: string, s: RunningSimulator, role: string) => ({
      id,
      url: s.url,
      role,
      mode: 'direct',
      models: [QWEN],
      dispatchProfile: 'handoff',
      ...(s.kvEvents ? { kvEvents: { endpoint: s.kvEvents.endpoint } } : {}),
    });
    const config = validateCoordinatorConfig({
      server: { port: 0 },
      instances: [inst('P', p, 'prefill'), inst('D', d, 'decode')],
      kvHash: {
        groups: [
          {
            name: QWEN,
            models: [QWEN],
            tokenizer: { path: QWEN3_DIR },
            blockHash: { algo: 'sha256', blockSize: 16, seed: '0' },
          },
        ],
      },
      decodeFirst: { enabled: true, minCachedFraction: 0.8, maxUncachedTokens: 0 },
      health: { intervalMs: 0 },
      observability: { accessLog: false },
      management: { port: null },
    });
    expect(config.warnings?.filter((w) => w.startsWith('decodeFirst'))).toEqual([]);
    coord = await startCoordinator(config, log);
    keys = await PromptBlockKeys.start(config.kvHash.groups, log);
    predictor = new KvPredictor(keys, coord.kvEvents!, log); // what the coordinator predicts, for the check
    // ZeroMQ subscriptions take effect asynchronously: probe the decode until the index has a batch
    for (let probe = 0; probe < 500 && coord.kvEvents!.status()[0]?.lastSeq === null; probe++)
      await post(d.url, '/v1/completions', {
        model: QWEN,
        prompt: Array.from({ length: 17 }, (_, k) => 50_000 + 100 * probe + k), // one full block
        max_tokens: 1,
      });
    expect(coord.kvEvents!.status()[0]?.lastSeq).not.toBeNull();
  }, 120_000);

  afterAll(async () => {
    await keys?.close();
    await coord?.close();
    await Promise.all([p?.close(), d?.close()]);
  });

  it('the repeated turn goes to the decode alone; its cached tokens are the predicted ones', async () => {
    const before = (await idleLedger(d.url)).finished.length;
    const messages = [{ role: 'user', content: 'Explain the quarterly report to the board. '.repeat(40) }];
    const first = await post(coord.url, '/v1/chat/completions', { model: QWEN, messages, max_tokens: 4 });
    expect(first.status).toBe(200);
    messages.push({ role: 'assistant', content: first.json.choices[0].message.content });
    messages.push({ role: 'user', content: 'And the risks?' });
    // the decode's BlockStored events of the first turn reach the index (a batch per step)
    const published = d.core.cache.listener as KvEventsPublisher;
    for (let turn = 0; turn < 20_000; turn++) {
      if (coord.kvEvents!.status()[0]?.lastSeq === published.published - 1n) break;
      await new Promise((r) => setTimeout(r, 1));
    }
    const body = { model: QWEN, messages, max_tokens: 4 };
    const client = { kind: 'chat', model: QWEN, body, stream: false } as unknown as ClientRequest;
    const predicted = (await predictor.predict(client))?.cachedTokens.get('D');
    const second = await post(coord.url, '/v1/chat/completions', body);
    expect(second.status).toBe(200);
    const cached = second.json.usage.prompt_tokens_details.cached_tokens as number;
    expect(cached).toBe(predicted);
    expect(cached).toBeGreaterThanOrEqual(0.8 * second.json.usage.prompt_tokens);
    expect((await idleLedger(p.url)).finished.map((f) => f.flow)).toEqual(['handoff_prefill']);
    expect((await idleLedger(d.url)).finished.slice(before).map((f) => f.flow)).toEqual([
      'handoff_decode',
      'plain',
    ]);
    const metrics = (await http(coord.url, 'GET', '/metrics')).text;
    expect(metrics).toMatch(/motor_decode_first_total\{outcome="prefill",source="precise"\} 1/);
    expect(metrics).toMatch(/motor_decode_first_total\{outcome="cached",source="precise"\} 1/);
  });
});
