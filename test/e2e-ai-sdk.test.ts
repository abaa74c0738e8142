import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import {
  MODEL,
  NIXL,
  recorded,
  resetSim,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * The AI SDK (`ai` 6 + `@ai-sdk/openai` 3) as a client of a handoff pair (vLLM NIXL, direct): its default
 * provider model speaks `/v1/responses` (@ai-sdk/openai openai-provider.ts: `openai(id)` is the responses
 * model), `.chat(id)` speaks `/v1/chat/completions`. A tool round trip: the simulator calls a tool the
 * last user message names; the SDK runs it and sends the result back as the next step.
 */

let coord: CoordinatorHandle;
let D: MotorChild;

beforeAll(async () => {
  try {
    const [P, d] = await Promise.all([startSim({ role: 'prefill' }), startSim({ role: 'decode' })]);
    D = d;
    const inst = (id: string, sim: MotorChild, role: string) => ({
      id,
      url: sim.url,
      role,
      mode: 'direct',
      models: [MODEL],
      kvTransferConfig: NIXL,
    });
    coord = await startCoordinatorProcess({ instances: [inst('P', P, 'prefill'), inst('D', D, 'decode')] });
    while ((await fetch(`${coord.url}/ready`)).status !== 200) await new Promise((r) => setImmediate(r));
  } catch (err) {
    await stopAllSpawned();
    throw err;
  }
}, 120_000);

afterAll(async () => {
  await coord?.stop();
  await stopAllSpawned();
});

/** What the SDK sent: path and body of each request (its fetch wrapped, the request unchanged). */
const sent: Array<{ path: string; body: Record<string, unknown> }> = [];
const provider = () =>
  createOpenAI({
    baseURL: `${coord.url}/v1`,
    apiKey: 'unused',
    fetch: (input, init) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : {};
      sent.push({ path: new URL(url).pathname, body });
      return fetch(input, init);
    },
  });
const CLIENT_PATH: Record<Api, string> = { responses: '/v1/responses', chat: '/v1/chat/completions' };

const weather = tool({
  description: 'weather for a city',
  inputSchema: jsonSchema<{ city: string }>({
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
  }),
  execute: ({ city }) => Promise.resolve(`sunny in ${city}`),
});

type Api = 'responses' | 'chat';
const APIS: Api[] = ['responses', 'chat'];
const ENGINE_PATH = '/v1/chat/completions';

describe.each(APIS)('AI SDK over %s', (api) => {
  const model = () => (api === 'responses' ? provider()(MODEL) : provider().chat(MODEL));

  it('generateText and streamText give the same text', async () => {
    await resetSim(D);
    sent.length = 0;
    const prompt = 'tell me about rivers';
    const g = await generateText({ model: model(), prompt, maxOutputTokens: 8, maxRetries: 0 });
    expect(g.text.length).toBeGreaterThan(0);
    expect(g.usage.outputTokens).toBeGreaterThan(0);
    const s = streamText({ model: model(), prompt, maxOutputTokens: 8, maxRetries: 0 });
    let streamed = '';
    for await (const part of s.textStream) streamed += part;
    expect(streamed).toBe(g.text);
    expect(await s.finishReason).toBe(g.finishReason);
    // every leg reached the engine as a chat completion, whatever the client API
    const legs = await recorded(D);
    expect(legs.length).toBe(2);
    for (const leg of legs) expect(leg.path).toBe(ENGINE_PATH);
    expect(sent.map((r) => r.path)).toEqual([CLIENT_PATH[api], CLIENT_PATH[api]]);
  });

  it('a tool round trip: the call, the SDK runs the tool, the result goes back, the model answers', async () => {
    await resetSim(D);
    sent.length = 0;
    const r = await generateText({
      model: model(),
      prompt: 'call get_weather for Paris',
      tools: { get_weather: weather },
      stopWhen: stepCountIs(3),
      maxOutputTokens: 32,
      maxRetries: 0,
    });
    const [first, second] = r.steps;
    expect(first?.finishReason).toBe('tool-calls');
    expect(first?.toolCalls.map((c) => c.toolName)).toEqual(['get_weather']);
    expect(first?.toolResults[0]?.output).toMatch(/^sunny in /);
    expect(second?.finishReason).not.toBe('tool-calls');
    expect(r.text.length).toBeGreaterThan(0);
    // the second step's decode leg carried the tool result as a `tool` message answering the call
    const legs = await recorded(D);
    const last = legs[legs.length - 1]!.body as { messages: Array<Record<string, unknown>> };
    const toolMsg = last.messages.find((m) => m.role === 'tool');
    expect(toolMsg?.content).toContain('sunny in');
    const call = last.messages.find((m) => Array.isArray(m.tool_calls)) as
      { tool_calls: Array<{ id: string }> } | undefined;
    expect(toolMsg?.tool_call_id).toBe(call?.tool_calls[0]?.id);
    expect(sent.map((x) => x.path)).toEqual([CLIENT_PATH[api], CLIENT_PATH[api]]);
    if (api === 'responses') {
      // the SDK's second step answers the call with a function_call_output item (and, store being
      // on, refers to the earlier call by item_reference, which the coordinator resolves)
      const input = sent[1]!.body.input as Array<{ type?: string }>;
      expect(input.map((i) => i.type)).toContain('function_call_output');
    }
  });

  it('streamText with a tool: the streamed call is the same call', async () => {
    const s = streamText({
      model: model(),
      prompt: 'call get_weather for Paris',
      tools: { get_weather: weather },
      stopWhen: stepCountIs(3),
      maxOutputTokens: 32,
      maxRetries: 0,
    });
    const types: string[] = [];
    for await (const part of s.fullStream) {
      if (part.type === 'error') throw part.error as Error;
      types.push(part.type);
    }
    const steps = await s.steps;
    expect(steps[0]?.toolCalls.map((c) => c.toolName)).toEqual(['get_weather']);
    expect(types).toContain('tool-call');
    expect(types).toContain('tool-result');
    expect((await s.text).length).toBeGreaterThan(0);
  });
});
