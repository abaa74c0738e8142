import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from '../src/coordinator/coordinator.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { http, idleLedger, post, sseEvents } from '../src/simulator/testing.js';

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
