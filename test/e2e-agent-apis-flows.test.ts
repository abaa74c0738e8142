import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import { http } from '../src/simulator/testing/index.js';
import {
  LAYERWISE,
  MODEL,
  NIXL,
  recorded,
  resetSim,
  setFaults,
  startCoordinatorProcess,
  startEngineProxy,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';
import { checkMessagesStream, checkResponsesStream } from './helpers/agent-api-streams.js';

/**
 * Anthropic Messages and OpenAI Responses on the flows e2e-agent-apis.test.ts does not run: proxy mode
 * (`motor engine-proxy` in front of each sim) with the handoff (NIXL) and the layer-wise trigger
 * (Mooncake) connector, and vllm-ascend's trigger flow in direct mode; then a decode that dies
 * mid-stream: the migrated stream a client reads is one valid stream with the uninterrupted text.
 */

type Flow = 'proxy-handoff' | 'proxy-trigger' | 'ascend-trigger';
const FLOWS: Flow[] = ['proxy-handoff', 'proxy-trigger', 'ascend-trigger'];
const coords: Partial<Record<Flow, CoordinatorHandle>> = {};
/** The decode sim of each flow (what its legs reached). */
const decodes: Partial<Record<Flow, MotorChild>> = {};
let migrating: CoordinatorHandle;
let dyingDecode: MotorChild;

const common = {
  scheduling: { circuitBreaker: { enabled: false } },
  health: { unhealthyAfter: 1_000_000 },
};

async function ready(c: CoordinatorHandle): Promise<void> {
  // /ready waits for discovery; poll the coordinator's own answer, bounded by the hook timeout
  while ((await fetch(`${c.url}/ready`)).status !== 200) await new Promise((r) => setImmediate(r));
}

beforeAll(async () => {
  try {
    const ascend = ['--engine-version', 'main'];
    const [vP, vD, aP, aD, mP, mD] = await Promise.all([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startSim({ role: 'prefill', engine: 'vllm-ascend', args: ascend }),
      startSim({ role: 'decode', engine: 'vllm-ascend', args: ascend }),
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
    ]);
    dyingDecode = mD;
    const [hP, hD, tP, tD] = await Promise.all([
      startEngineProxy(vP, 'prefill', { kv_transfer_config: NIXL }),
      startEngineProxy(vD, 'decode', { kv_transfer_config: NIXL }),
      startEngineProxy(vP, 'prefill', { kv_transfer_config: LAYERWISE }),
      startEngineProxy(vD, 'decode', { kv_transfer_config: LAYERWISE }),
    ]);
    const pd = (p: string, d: string, extra: Record<string, unknown>) => [
      { id: 'P', url: p, role: 'prefill', models: [MODEL], ...extra },
      { id: 'D', url: d, role: 'decode', models: [MODEL], ...extra },
    ];
    const started = await Promise.all([
      startCoordinatorProcess({
        ...common,
        instances: pd(hP.url, hD.url, { mode: 'proxy', kvTransferConfig: NIXL }),
      }),
      startCoordinatorProcess({
        ...common,
        instances: pd(tP.url, tD.url, { mode: 'proxy', kvTransferConfig: LAYERWISE }),
      }),
      startCoordinatorProcess({
        ...common,
        instances: pd(aP.url, aD.url, { mode: 'direct', dispatchProfile: 'trigger' }),
      }),
      startCoordinatorProcess({
        ...common,
        instances: pd(mP.url, mD.url, { mode: 'direct', kvTransferConfig: NIXL }),
      }),
    ]);
    [coords['proxy-handoff'], coords['proxy-trigger'], coords['ascend-trigger'], migrating] = started;
    Object.assign(decodes, { 'proxy-handoff': vD, 'proxy-trigger': vD, 'ascend-trigger': aD });
    await Promise.all(started.map(ready));
  } catch (err) {
    await stopAllSpawned();
    throw err;
  }
}, 180_000);

afterAll(async () => {
  await Promise.all([...Object.values(coords), migrating].map((c) => c?.stop()));
  await stopAllSpawned();
});

const anthropic = (c: CoordinatorHandle) =>
  new Anthropic({ baseURL: c.url, apiKey: 'unused', maxRetries: 0 });
const openai = (c: CoordinatorHandle) =>
  new OpenAI({ baseURL: `${c.url}/v1`, apiKey: 'unused', maxRetries: 0 });

describe.each(FLOWS)('agent APIs, %s', (flow) => {
  const c = () => coords[flow]!;

  it('messages: create and stream give the same text; the decode leg ran a chat completion', async () => {
    await resetSim(decodes[flow]!);
    const body = {
      model: MODEL,
      max_tokens: 10,
      system: 'be brief',
      messages: [{ role: 'user' as const, content: 'tell me about rivers' }],
    };
    const m = await anthropic(c()).messages.create(body);
    expect(m.type).toBe('message');
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    const text = m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    expect(text.length).toBeGreaterThan(0);
    const streamed = await anthropic(c()).messages.stream(body).finalMessage();
    expect(streamed.content.map((b) => (b.type === 'text' ? b.text : '')).join('')).toBe(text);
    expect(streamed.stop_reason).toBe(m.stop_reason);
    // legs are chat completions carrying the system prompt, never an engine's /v1/messages
    const legs = await recorded(decodes[flow]!);
    expect(legs.length).toBeGreaterThanOrEqual(2);
    for (const leg of legs) {
      expect(leg.path).toBe('/v1/chat/completions');
      expect(leg.body.messages[0]).toEqual({ role: 'system', content: 'be brief' });
    }
  });

  it('messages: a tool_use round trip (tool_result answers it)', async () => {
    const tools = [
      {
        name: 'get_weather',
        description: 'weather for a city',
        input_schema: {
          type: 'object' as const,
          properties: { city: { type: 'string' } },
          required: ['city'],
        },
      },
    ];
    const ask = { role: 'user' as const, content: 'call get_weather for Paris' };
    const first = await anthropic(c()).messages.create({
      model: MODEL,
      max_tokens: 64,
      tools,
      messages: [ask],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    expect(use?.type).toBe('tool_use');
    const second = await anthropic(c()).messages.create({
      model: MODEL,
      max_tokens: 8,
      tools,
      messages: [
        ask,
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: use!.type === 'tool_use' ? use!.id : '', content: 'sunny' },
          ],
        },
      ],
    });
    expect(second.type).toBe('message');
    // Anthropic's input_tokens leaves out cache reads (`Usage`): the prompt is their sum
    const prompt = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    expect(prompt(second.usage), JSON.stringify([first.usage, second.usage])).toBeGreaterThan(
      prompt(first.usage),
    );
  });

  it('responses: create, a previous_response_id chain, and a stream with contiguous sequence numbers', async () => {
    const client = openai(c());
    const first = await client.responses.create({ model: MODEL, input: 'hello there', max_output_tokens: 8 });
    expect(first.output_text.length).toBeGreaterThan(0);
    const second = await client.responses.create({
      model: MODEL,
      input: 'and again',
      previous_response_id: first.id,
      max_output_tokens: 8,
    });
    expect(second.previous_response_id).toBe(first.id);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    const raw = await http(c().url, 'POST', '/v1/responses', {
      model: MODEL,
      input: 'hello there',
      max_output_tokens: 8,
      stream: true,
    });
    expect(raw.status).toBe(200);
    const { text, final } = checkResponsesStream(raw.text);
    expect(text).toBe(first.output_text);
    expect(final.status).toBe(first.status);
  });
});

describe('a decode dying mid-stream: the migrated Messages / Responses stream stays one valid stream', () => {
  const messages = {
    model: MODEL,
    max_tokens: 12,
    messages: [{ role: 'user', content: 'tell me about rivers' }],
  };
  const responses = { model: MODEL, input: 'tell me about rivers', max_output_tokens: 12, store: false };

  it('messages', async () => {
    await setFaults(dyingDecode, { die_after_tokens: -1 });
    const ref = checkMessagesStream(
      (await http(migrating.url, 'POST', '/v1/messages', { ...messages, stream: true })).text,
    );
    expect(ref.text.length).toBeGreaterThan(0);
    await setFaults(dyingDecode, { die_after_tokens: 5 });
    const before = await migrations();
    const got = checkMessagesStream(
      (await http(migrating.url, 'POST', '/v1/messages', { ...messages, stream: true })).text,
    );
    expect(await migrations()).toBeGreaterThan(before); // it did migrate
    expect(got.text).toBe(ref.text); // no duplicate and no missing text
    expect(got.events).toEqual(ref.events);
    expect(got.stopReason).toBe(ref.stopReason);
    // and the real client reads it as one message
    const viaSdk = await anthropic(migrating)
      .messages.stream(messages as never)
      .finalMessage();
    expect(viaSdk.content.map((b) => (b.type === 'text' ? b.text : '')).join('')).toBe(ref.text);
  }, 60_000);

  it('responses', async () => {
    await setFaults(dyingDecode, { die_after_tokens: -1 });
    const ref = checkResponsesStream(
      (await http(migrating.url, 'POST', '/v1/responses', { ...responses, stream: true })).text,
    );
    await setFaults(dyingDecode, { die_after_tokens: 5 });
    const before = await migrations();
    const raw = (await http(migrating.url, 'POST', '/v1/responses', { ...responses, stream: true })).text;
    const got = checkResponsesStream(raw);
    expect(await migrations()).toBeGreaterThan(before);
    expect(got.text).toBe(ref.text);
    expect(got.final.status).toBe(ref.final.status);
    // the same items, each id made from this request's root id (kept across the migration)
    const withoutIds = (r: Record<string, unknown>) =>
      (r.output as Record<string, unknown>[]).map(({ id: _id, ...item }) => item);
    expect(withoutIds(got.final)).toEqual(withoutIds(ref.final));
    const rootId = (got.final.id as string).slice('resp_'.length);
    for (const item of got.final.output as Array<{ id: string }>) expect(item.id).toContain(rootId);
    const stream = openai(migrating).responses.stream(responses);
    const seqs: number[] = [];
    for await (const e of stream) seqs.push(e.sequence_number);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect((await stream.finalResponse()).output_text).toBe(ref.text);
  }, 60_000);

  afterAll(async () => {
    if (dyingDecode) await setFaults(dyingDecode, { die_after_tokens: -1 });
  });
});

/** Resumed migrations so far on the migrating coordinator. */
async function migrations(): Promise<number> {
  const text = (await http(migrating.url, 'GET', '/metrics')).text;
  let n = 0;
  for (const m of text.matchAll(/^motor_migrations_total\{[^}]*outcome="resumed"[^}]*\} (\d+)$/gm))
    n += Number(m[1]);
  return n;
}
