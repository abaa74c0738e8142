import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import { http } from '../src/simulator/testing/index.js';
import {
  engineIdOf,
  eventually,
  LAYERWISE,
  MODEL,
  NIXL,
  rawPost,
  recorded,
  resetSim,
  setFaults,
  settledLedgers,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * The scheduling library on the coordinator's request path, end to end (real `motor sim` and
 * `motor coordinator` processes, direct vLLM mode): circuit breaker (conformance 31), admission,
 * prefix affinity across a multi-turn conversation, capability-aware pairing in a mixed fleet
 * (conformance 16). Nothing here depends on how fast the machine is: waits are lower bounds or polls.
 */

const OPEN_MS = 1000;

let P: MotorChild[] = [];
let D: MotorChild[] = [];
const coords: Record<'breaker' | 'admission' | 'affinity' | 'mixed', CoordinatorHandle> = {} as never;

const inst = (id: string, sim: MotorChild, role: 'prefill' | 'decode', kv = NIXL) => ({
  id,
  url: sim.url,
  role,
  mode: 'direct',
  models: [MODEL],
  kvTransferConfig: kv,
});

const common = { retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 } };

beforeAll(async () => {
  const sims = await Promise.all([
    startSim({ role: 'prefill' }),
    startSim({ role: 'prefill' }),
    startSim({ role: 'prefill' }),
    startSim({ role: 'decode' }),
    startSim({ role: 'decode' }),
  ]);
  P = sims.slice(0, 3);
  D = sims.slice(3);
  [coords.breaker, coords.admission, coords.affinity, coords.mixed] = await Promise.all([
    startCoordinatorProcess({
      ...common,
      instances: [inst('P0', P[0]!, 'prefill'), inst('P1', P[1]!, 'prefill'), inst('D0', D[0]!, 'decode')],
      scheduling: {
        policy: 'round-robin',
        circuitBreaker: { failureThreshold: 2, openMs: OPEN_MS, halfOpenMaxProbes: 1 },
      },
    }),
    startCoordinatorProcess({
      ...common,
      instances: [inst('P0', P[0]!, 'prefill'), inst('D0', D[0]!, 'decode')],
      scheduling: {
        admission: {
          maxConcurrent: 1,
          maxQueue: 1,
          queueTimeoutMs: 2000,
          retryAfterSeconds: 7,
          rateLimit: { ratePerSecond: 0.01, burst: 1 },
        },
      },
    }),
    startCoordinatorProcess({
      ...common,
      instances: [
        inst('P0', P[0]!, 'prefill'),
        inst('P1', P[1]!, 'prefill'),
        inst('P2', P[2]!, 'prefill'),
        inst('D0', D[0]!, 'decode'),
        inst('D1', D[1]!, 'decode'),
      ],
      scheduling: { policy: 'prefix-affinity' },
    }),
    startCoordinatorProcess({
      ...common,
      // P0/D0 handoff only, P1/D1 trigger only: a cross pair would fail late at KV transfer.
      instances: [
        inst('P0', P[0]!, 'prefill', NIXL),
        inst('P1', P[1]!, 'prefill', LAYERWISE),
        inst('D0', D[0]!, 'decode', NIXL),
        inst('D1', D[1]!, 'decode', LAYERWISE),
      ],
      scheduling: { policy: 'round-robin' },
    }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all(Object.values(coords).map((c) => c?.stop()));
  await stopAllSpawned();
});

beforeEach(async () => {
  await Promise.all([...P, ...D].map(resetSim));
});

const ask = (coord: CoordinatorHandle, content: string, extra: Record<string, unknown> = {}) =>
  coord.client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content }],
    max_tokens: 2,
    ...extra,
  });

const transitions = (coord: CoordinatorHandle, instance: string): string[] =>
  coord.child.logs
    .filter((l) => l.msg === 'circuit state changed' && l.instance === instance)
    .map((l) => `${String(l.from)}>${String(l.to)}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('circuit breaker (31)', () => {
  it('opens after consecutive 5xx, routes around the instance, half-opens after openMs, closes on success', async () => {
    const coord = coords.breaker;
    await setFaults(P[0]!, { error_next: 1000, error_status: 500 });
    // Every request succeeds (a failed prefill is retried on the other instance) until P0 failed twice.
    for (let i = 0; (await recorded(P[0]!)).length < 2; i++) {
      expect(i).toBeLessThan(20);
      const r = await ask(coord, `warm ${i}`);
      expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    }
    await eventually(async () => expect(transitions(coord, 'P0')[0]).toBe('closed>open'));
    // Open: every request lands on P1. P0 gets nothing but a probe per half-open period (only if this
    // phase outlasts openMs on a slow machine), and each such probe fails and re-opens the circuit.
    const before = (await recorded(P[1]!)).length;
    for (let i = 0; i < 4; i++) await ask(coord, `open ${i}`);
    expect((await recorded(P[1]!)).length - before).toBeGreaterThanOrEqual(4);
    await eventually(async () => {
      const t = transitions(coord, 'P0');
      const failedProbes = t.filter((x) => x === 'half_open>open').length;
      expect(await recorded(P[0]!)).toHaveLength(2 + failedProbes);
      expect(t).not.toContain('half_open>closed');
    });

    // After openMs: one probe; P0 still fails → open again (the request itself succeeds on P1).
    await sleep(OPEN_MS + 100);
    const probed = (await recorded(P[0]!)).length;
    for (let i = 0; (await recorded(P[0]!)).length === probed; i++) {
      expect(i).toBeLessThan(10);
      await ask(coord, `probe ${i}`);
    }
    await eventually(async () =>
      expect(transitions(coord, 'P0').slice(-2)).toEqual(['open>half_open', 'half_open>open']),
    );

    // Fixed: the next probe succeeds and closes the circuit; P0 takes work again.
    await http(P[0]!.url, 'DELETE', '/debug/faults');
    await sleep(OPEN_MS + 100);
    const fixed = (await recorded(P[0]!)).length;
    for (let i = 0; (await recorded(P[0]!)).length === fixed; i++) {
      expect(i).toBeLessThan(10);
      await ask(coord, `heal ${i}`);
    }
    await eventually(async () =>
      expect(transitions(coord, 'P0').slice(-2)).toEqual(['open>half_open', 'half_open>closed']),
    );
    const healed = (await recorded(P[0]!)).length;
    for (let i = 0; i < 4; i++) await ask(coord, `closed ${i}`);
    expect((await recorded(P[0]!)).length - healed).toBe(2); // round-robin again
    expect(transitions(coord, 'P1')).toEqual([]);
  }, 60_000);
});

describe('admission', () => {
  it('full → 503 with Retry-After (queue full at once, queue timeout later); per-key rate limit → 429', async () => {
    const coord = coords.admission;
    await setFaults(D[0]!, { hang_before_first_token_ms: -1 });
    const holder = new AbortController();
    const held = coord.client.chat.completions
      .create(
        { model: MODEL, messages: [{ role: 'user', content: 'hold the only slot' }], max_tokens: 2 },
        { signal: holder.signal },
      )
      .catch((e: unknown) => e);
    await eventually(async () => expect((await recorded(D[0]!)).length).toBe(1), 20_000);
    const [a, b] = await Promise.all(
      ['k1', 'k2'].map((key) =>
        rawPost(
          coord.url,
          '/v1/chat/completions',
          { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
          { authorization: `Bearer ${key}` },
        ),
      ),
    );
    for (const r of [a!, b!]) {
      expect(r.status).toBe(503);
      expect(r.headers['retry-after']).toBe('7');
      expect(r.json.error.code).toBe('overloaded');
    }
    // Usually one finds the queue full and the other times out in it (both if they arrive > 2 s apart).
    for (const r of [a!, b!])
      expect(r.json.error.message).toMatch(
        /^(no capacity within 2000 ms|server overloaded: 1 requests running, queue full)$/,
      );
    expect(await recorded(P[0]!)).toHaveLength(1); // neither reached an engine

    // Free the slot: the client of the held request goes away (its legs are aborted).
    holder.abort();
    expect(await held).toBeInstanceOf(OpenAI.APIUserAbortError);
    await http(D[0]!.url, 'DELETE', '/debug/faults');
    const limited = new OpenAI({ baseURL: `${coord.url}/v1`, apiKey: 'rl', maxRetries: 0, timeout: 20_000 });
    await eventually(async () => {
      const ok = await limited.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'first' }],
        max_tokens: 1,
      });
      expect(ok.choices).toHaveLength(1);
    }, 20_000);
    const second = await rawPost(
      coord.url,
      '/v1/chat/completions',
      { model: MODEL, messages: [{ role: 'user', content: 'second' }] },
      { authorization: 'Bearer rl' },
    );
    expect(second.status).toBe(429);
    expect(second.json.error.type).toBe('rate_limit_error');
    expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    await settledLedgers([...P, ...D]);
  }, 60_000);
});

describe('prefix affinity', () => {
  it('sends every turn of a conversation to the prefill instance holding its history, with cache hits', async () => {
    const coord = coords.affinity;
    const conversations = ['alpha', 'bravo', 'charlie'].map((name) => [
      {
        role: 'system' as const,
        content: `You are assistant ${name}. ${'Answer briefly and cite the prefix cache. '.repeat(6)}`,
      },
    ]);
    const owners = new Map<number, Set<string>>();
    const cached: number[] = [];
    for (let turn = 0; turn < 4; turn++) {
      for (let c = 0; c < conversations.length; c++) {
        const messages = conversations[c]!;
        messages.push({ role: 'user', content: `turn ${turn} of conversation ${c}: tell me more` } as never);
        const { data, response } = await coord.client.chat.completions
          .create({ model: MODEL, messages, max_tokens: 8 })
          .withResponse();
        const root = response.headers.get('x-request-id')!;
        messages.push({ role: 'assistant', content: data.choices[0]!.message.content ?? '' } as never);
        if (turn > 0) cached.push(data.usage!.prompt_tokens_details?.cached_tokens ?? 0);
        for (let i = 0; i < P.length; i++) {
          if ((await recorded(P[i]!)).some((r) => engineIdOf(r)?.startsWith(root)))
            owners.set(c, (owners.get(c) ?? new Set()).add(`P${i}`));
        }
      }
    }
    for (let c = 0; c < conversations.length; c++) expect(owners.get(c)?.size).toBe(1);
    expect(cached.every((n) => n > 0)).toBe(true);
  }, 60_000);
});

describe('capability-aware pairing (16)', () => {
  it('a mixed handoff/trigger fleet only ever pairs instances that share a plan', async () => {
    const coord = coords.mixed;
    const roots: string[] = [];
    for (let i = 0; i < 8; i++) {
      const { response } = await coord.client.chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content: `mixed ${i}` }], max_tokens: 2 })
        .withResponse();
      roots.push(response.headers.get('x-request-id')!);
    }
    const where = async (sims: MotorChild[]) => {
      const seen = await Promise.all(sims.map(recorded));
      return roots.map((root) =>
        seen.flatMap((list, i) => (list.some((r) => engineIdOf(r)?.startsWith(root)) ? [i] : [])),
      );
    };
    const prefillOf = await where(P.slice(0, 2));
    const decodeOf = await where(D);
    const pairs = roots.map((_, k) => `P${prefillOf[k]!.join()}-D${decodeOf[k]!.join()}`);
    for (const pair of pairs) expect(['P0-D0', 'P1-D1']).toContain(pair);
    expect(new Set(pairs).size).toBe(2); // both compatible pairs are used
  }, 60_000);
});
