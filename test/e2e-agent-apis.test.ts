import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MODEL,
  NIXL,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * Anthropic Messages and OpenAI Responses through Motor with the official SDKs as clients, on a
 * handoff pair (vLLM NIXL), a bootstrap pair (SGLang) and a union instance, direct mode: each request
 * is translated to chat legs and answered in the client API's own shape.
 */
type Flow = 'handoff' | 'bootstrap' | 'single';
const FLOWS: Flow[] = ['handoff', 'bootstrap', 'single'];
const coords: Partial<Record<Flow, CoordinatorHandle>> = {};

beforeAll(async () => {
  try {
    const [vP, vD, sP, sD, u] = await Promise.all([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startSim({ role: 'prefill', engine: 'sglang' }),
      startSim({ role: 'decode', engine: 'sglang' }),
      startSim({ role: 'union' }),
    ]);
    const pd = (p: string, d: string, extra: Record<string, unknown>) => [
      { id: 'P', url: p, role: 'prefill', mode: 'direct', models: [MODEL], ...extra },
      { id: 'D', url: d, role: 'decode', mode: 'direct', models: [MODEL], ...extra },
    ];
    const [h, b, s] = await Promise.all([
      startCoordinatorProcess({ instances: pd(vP.url, vD.url, { kvTransferConfig: NIXL }) }),
      startCoordinatorProcess({ instances: pd(sP.url, sD.url, { engine: 'sglang' }) }),
      startCoordinatorProcess({
        instances: [{ id: 'U', url: u.url, role: 'union', mode: 'direct', models: [MODEL] }],
      }),
    ]);
    Object.assign(coords, { handoff: h, bootstrap: b, single: s });
    for (const c of [h, b, s]) {
      // /ready waits for discovery; event-driven: poll the coordinator's own answer, bounded by the test timeout
      while ((await fetch(`${c.url}/ready`)).status !== 200) await new Promise((r) => setImmediate(r));
    }
  } catch (err) {
    await stopAllSpawned();
    throw err;
  }
}, 120_000);

afterAll(async () => {
  await stopAllSpawned();
});

describe.each(FLOWS)('agent APIs, %s flow', (flow) => {
  const anthropic = () => new Anthropic({ baseURL: coords[flow]!.url, apiKey: 'unused', maxRetries: 0 });
  const openai = () => new OpenAI({ baseURL: `${coords[flow]!.url}/v1`, apiKey: 'unused', maxRetries: 0 });

  it('messages.create and .stream() answer as Anthropic messages', async () => {
    const m = await anthropic().messages.create({
      model: MODEL,
      max_tokens: 8,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello there' }],
    });
    expect(m.type).toBe('message');
    expect(m.role).toBe('assistant');
    expect(m.content[0]?.type).toBe('text');
    expect(['end_turn', 'max_tokens']).toContain(m.stop_reason);
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    const streamed = await anthropic()
      .messages.stream({
        model: MODEL,
        max_tokens: 8,
        system: 'be brief',
        messages: [{ role: 'user', content: 'hello there' }],
      })
      .finalMessage();
    expect(streamed.content.map((c) => (c.type === 'text' ? c.text : '')).join('')).toBe(
      m.content.map((c) => (c.type === 'text' ? c.text : '')).join(''),
    );
  });

  it('a tool the user names comes back as a tool_use block with stop_reason tool_use', async () => {
    const m = await anthropic().messages.create({
      model: MODEL,
      max_tokens: 64,
      tools: [
        {
          name: 'get_weather',
          description: 'weather for a city',
          input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      ],
      messages: [{ role: 'user', content: 'call get_weather for Paris' }],
    });
    expect(m.stop_reason).toBe('tool_use');
    const use = m.content.find((c) => c.type === 'tool_use');
    expect(use?.type === 'tool_use' && use.name).toBe('get_weather');
    expect(use?.type === 'tool_use' && typeof (use.input as { city?: unknown }).city).toBe('string');
  });

  it('a missing max_tokens is a 400 in the Anthropic error shape naming the field', async () => {
    const res = await fetch(`${coords[flow]!.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { type: string; error: { type: string; message: string } };
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain('max_tokens');
  });

  it('responses: create, a previous_response_id chain, retrieve, delete', async () => {
    const client = openai();
    const first = await client.responses.create({ model: MODEL, input: 'hello there', max_output_tokens: 8 });
    expect(['completed', 'incomplete']).toContain(first.status);
    expect(first.output_text.length).toBeGreaterThan(0);
    const second = await client.responses.create({
      model: MODEL,
      input: 'and again',
      previous_response_id: first.id,
      max_output_tokens: 8,
    });
    // the chain replays turn one: the second prompt is longer than the first
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    expect((await client.responses.retrieve(first.id)).id).toBe(first.id);
    await client.responses.delete(first.id);
    await expect(client.responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
  });

  it('responses stream events carry increasing sequence numbers and end completed or incomplete (max_output_tokens)', async () => {
    const stream = openai().responses.stream({ model: MODEL, input: 'hello there', max_output_tokens: 8 });
    const seqs: number[] = [];
    for await (const event of stream) seqs.push(event.sequence_number);
    const final = await stream.finalResponse();
    expect(['completed', 'incomplete']).toContain(final.status);
    expect(seqs[0]).toBe(0);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });
});
