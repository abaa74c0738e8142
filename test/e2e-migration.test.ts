import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import { http, sseEvents } from '../src/simulator/testing/index.js';
import {
  MODEL,
  NIXL,
  setFaults,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * In-flight migration end to end (issue 16): `motor coordinator` (direct, handoff) over `motor sim`
 * engines whose output is a function of the context. A decode that dies after 5 tokens on every
 * request: the client's answer is byte-equal to an uninterrupted run's, with the same usage.
 */

const BODY = {
  model: MODEL,
  messages: [{ role: 'user', content: 'tell me about rivers' }],
  max_tokens: 12,
  seed: 11,
};

interface Answer {
  content: string;
  finish: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  ids: Set<string>;
  roles: number;
  errors: unknown[];
}

function streamAnswer(text: string): Answer {
  const a: Answer = { content: '', finish: null, usage: null, ids: new Set(), roles: 0, errors: [] };
  for (const e of sseEvents(text)) {
    if (e === '[DONE]') continue;
    const o = e as {
      id: string;
      error?: unknown;
      usage?: Answer['usage'];
      choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }>;
    };
    if (o.error) {
      a.errors.push(o.error);
      continue;
    }
    a.ids.add(o.id);
    if (o.usage) a.usage = { ...o.usage };
    for (const c of o.choices) {
      if (c.delta.role) a.roles++;
      a.content += c.delta.content ?? '';
      if (c.finish_reason) a.finish = c.finish_reason;
    }
  }
  return a;
}

const post = (c: CoordinatorHandle, body: object) => http(c.url, 'POST', '/v1/chat/completions', body);
const STREAM = { ...BODY, stream: true, stream_options: { include_usage: true } };

describe('in-flight migration through motor coordinator + motor sim', () => {
  let P: MotorChild, D: MotorChild, D2: MotorChild;
  /** One decode, dying on every request: every stream needs two migrations (5 + 5 + 2 tokens). */
  let oneDecode: CoordinatorHandle;
  /** Two decodes: a non-stream answer (nothing sent yet) is retried on the other one. */
  let twoDecodes: CoordinatorHandle;

  beforeAll(async () => {
    [P, D, D2] = await Promise.all([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startSim({ role: 'decode' }),
    ]);
    const common = {
      scheduling: { circuitBreaker: { enabled: false } },
      health: { unhealthyAfter: 1_000_000 },
    };
    const inst = (id: string, sim: MotorChild, role: string) => ({
      id,
      url: sim.url,
      role,
      mode: 'direct',
      models: [MODEL],
      kvTransferConfig: NIXL,
    });
    [oneDecode, twoDecodes] = await Promise.all([
      startCoordinatorProcess({ ...common, instances: [inst('P', P, 'prefill'), inst('D', D, 'decode')] }),
      startCoordinatorProcess({
        ...common,
        instances: [inst('P', P, 'prefill'), inst('D', D, 'decode'), inst('D2', D2, 'decode')],
      }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([oneDecode?.stop(), twoDecodes?.stop()]);
    await stopAllSpawned();
  });

  it('stream and non-stream answers are byte-equal to an uninterrupted run (raw HTTP and the openai client)', async () => {
    // uninterrupted references
    const refStream = streamAnswer((await post(oneDecode, STREAM)).text);
    const refJson = (await post(oneDecode, BODY)).json as {
      choices: Array<{ message: { content: string } }>;
    };
    expect(refStream.errors).toEqual([]);
    expect(refStream.usage?.completion_tokens).toBe(12);
    expect(refJson.choices[0]!.message.content).toBe(refStream.content);

    await setFaults(D, { die_after_tokens: 5 });

    const got = streamAnswer((await post(oneDecode, STREAM)).text);
    expect(got.errors).toEqual([]);
    expect(got.content).toBe(refStream.content);
    expect(got.finish).toBe(refStream.finish);
    // cached tokens are the continuation prefill's own (the prompt is in the prefix cache by now)
    const { prompt_tokens_details: cached, ...usage } = got.usage as Answer['usage'] & {
      prompt_tokens_details?: { cached_tokens: number };
    };
    const { prompt_tokens_details: _refCached, ...refUsage } = refStream.usage as typeof got.usage & {
      prompt_tokens_details?: unknown;
    };
    expect(usage).toEqual(refUsage);
    expect(cached!.cached_tokens).toBeLessThanOrEqual(usage.prompt_tokens);
    expect(got.roles).toBe(1);
    expect(got.ids.size).toBe(1);

    // the official client sees one ordinary stream
    const stream = await oneDecode.client.chat.completions.create({
      ...BODY,
      stream: true,
    } as never as Parameters<typeof oneDecode.client.chat.completions.create>[0] & { stream: true });
    let viaClient = '';
    for await (const chunk of stream) viaClient += chunk.choices[0]?.delta.content ?? '';
    expect(viaClient).toBe(refStream.content);

    // non-stream: its leg streams (migration.nonStreamLegs), so a leg dying mid-answer is continued —
    // on the other decode, or (one decode) on the same one twice — and the JSON answer is the same
    for (const c of [twoDecodes, oneDecode]) {
      const nonStream = await post(c, BODY);
      expect(nonStream.status).toBe(200);
      expect(comparable(nonStream.json)).toEqual(comparable(refJson));
    }

    const metrics = (await http(oneDecode.url, 'GET', '/metrics')).text;
    const resumed = /motor_migrations_total\{reason="connection_error",outcome="resumed"\} (\d+)/.exec(
      metrics,
    );
    expect(Number(resumed?.[1])).toBe(6); // (two streams + one non-stream) × two migrations
    expect(metrics).toMatch(/motor_migration_resume_seconds_count 6/);
  }, 60_000);

  it('failure → next token: motor_migration_resume_seconds over 20 streams (docs/RELIABILITY.md)', async () => {
    await setFaults(D, { die_after_tokens: 5 });
    const count = async () => histogram((await http(oneDecode.url, 'GET', '/metrics')).text);
    const before = await count();
    for (let i = 0; i < 20; i++) {
      const a = streamAnswer((await post(oneDecode, { ...STREAM, seed: 100 + i })).text);
      expect(a.errors).toEqual([]);
      expect(a.usage?.completion_tokens).toBe(12);
    }
    const after = await count();
    const n = after.count - before.count;
    expect(n).toBe(40); // two migrations per stream
    const within = (bound: number) => (after.le.get(bound) ?? 0) - (before.le.get(bound) ?? 0);
    const bounds = [...after.le.keys()].sort((a, b) => a - b);
    const pct = (p: number) => bounds.find((b) => within(b) >= Math.ceil((p / 100) * n));
    const report = {
      n,
      mean_ms: ((after.sum - before.sum) / n) * 1000,
      p50_le_s: pct(50),
      p99_le_s: pct(99),
    };
    console.log('motor_migration_resume_seconds (sim --time-scale 0.2):', JSON.stringify(report));
    expect(report.p99_le_s).toBeLessThanOrEqual(5);
  }, 120_000);
});

describe('vllm-ascend decode ending answers with stop_reason "recomputed" (layer-wise trigger, direct)', () => {
  let coord: CoordinatorHandle;
  let D: MotorChild;

  beforeAll(async () => {
    const args = ['--engine-version', 'main'];
    const [P, d] = await Promise.all([
      startSim({ role: 'prefill', engine: 'vllm-ascend', args }),
      startSim({ role: 'decode', engine: 'vllm-ascend', args }),
    ]);
    D = d;
    const inst = (sim: MotorChild, role: string) => ({
      url: sim.url,
      role,
      mode: 'direct',
      dispatchProfile: 'trigger',
    });
    coord = await startCoordinatorProcess({
      scheduling: { circuitBreaker: { enabled: false } },
      health: { unhealthyAfter: 1_000_000 },
      instances: [inst(P, 'prefill'), inst(D, 'decode')],
    });
  }, 120_000);

  afterAll(async () => {
    await coord?.stop();
    await stopAllSpawned();
  });

  it('every decode recomputed after 5 tokens → stream and non-stream answers as uninterrupted', async () => {
    const refStream = streamAnswer((await post(coord, STREAM)).text);
    const refJson = (await post(coord, BODY)).json;
    expect(refStream.usage?.completion_tokens).toBe(12);
    await setFaults(D, { recompute_after: 5 });
    const got = streamAnswer((await post(coord, STREAM)).text);
    expect(got.errors).toEqual([]);
    expect(got.content).toBe(refStream.content);
    expect(got.usage?.completion_tokens).toBe(12);
    const json = await post(coord, BODY);
    expect(json.status).toBe(200);
    expect(comparable(json.json)).toEqual(comparable(refJson));
    const metrics = (await http(coord.url, 'GET', '/metrics')).text;
    expect(metrics).toMatch(/motor_migrations_total\{reason="decode_recomputed",outcome="resumed"\} 4/);
  }, 60_000);
});

/** A non-stream answer without what differs between two requests (id, created, cached tokens). */
function comparable(json: unknown): unknown {
  const {
    id: _id,
    created: _created,
    usage,
    ...rest
  } = json as Record<string, unknown> & {
    usage: Record<string, unknown>;
  };
  const { prompt_tokens_details: _cached, ...u } = usage;
  return { ...rest, usage: u };
}

/** The `motor_migration_resume_seconds` histogram of a /metrics text: cumulative buckets, sum, count. */
function histogram(text: string): { le: Map<number, number>; sum: number; count: number } {
  const le = new Map<number, number>();
  for (const m of text.matchAll(/^motor_migration_resume_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm))
    if (m[1] !== '+Inf') le.set(Number(m[1]), Number(m[2]));
  const num = (name: string) =>
    Number(new RegExp(`^motor_migration_resume_seconds_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { le, sum: num('sum'), count: num('count') };
}
