import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { post, sseEvents } from './testing/index.js';

/** Tool calls as vLLM's OpenAI server returns them, non-stream and streamed (tool-request.ts, answer.ts). */
const log = createLogger('sim-tools', 'silent');
let vllm: RunningSimulator;
let sglang: RunningSimulator;
beforeAll(async () => {
  [vllm, sglang] = await Promise.all([
    startSimulator({ timeScale: 0 }, log),
    startSimulator({ timeScale: 0, engine: 'sglang' }, log),
  ]);
});
afterAll(async () => {
  await Promise.all([vllm.close(), sglang.close()]);
});

const PARAMS = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 2 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 1 },
  },
  required: ['city', 'unit', 'days', 'tags'],
  additionalProperties: false,
};
const TOOLS = [{ type: 'function', function: { name: 'get_weather', parameters: PARAMS } }];
const ask = (extra: Record<string, unknown> = {}) => ({
  model: 'motor-sim-7b',
  messages: [{ role: 'user', content: 'What is the weather in Paris? Use get_weather.' }],
  tools: TOOLS,
  seed: 7,
  ...extra,
});

type ToolCall = { id: string; index?: number; type: string; function: { name: string; arguments: string } };
type Delta = {
  role?: string;
  content?: string;
  tool_calls?: Array<{
    index: number;
    id?: string;
    type?: string;
    function: { name?: string; arguments?: string };
  }>;
};
type Chunk = {
  choices: Array<{ delta: Delta; finish_reason: string | null }>;
  usage?: { completion_tokens: number };
};

const validArgs = new Ajv2020().compile(PARAMS);

describe('tool calls (non-stream)', () => {
  it('auto + a named tool in the user message → one call, vLLM shape, arguments valid against the schema', async () => {
    const r = await post(vllm.url, '/v1/chat/completions', ask());
    expect(r.status).toBe(200);
    const choice = r.json.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const calls = choice.message.tool_calls as ToolCall[];
    expect(calls).toHaveLength(1);
    expect(Object.keys(calls[0]!).sort()).toEqual(['function', 'id', 'type']);
    expect(calls[0]!.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(calls[0]!.type).toBe('function');
    expect(calls[0]!.function.name).toBe('get_weather');
    const args = JSON.parse(calls[0]!.function.arguments) as unknown;
    expect(validArgs(args), JSON.stringify(validArgs.errors)).toBe(true);
    // Python json.dumps spacing, as vLLM's tool parsers serialise arguments
    expect(calls[0]!.function.arguments).toMatch(/^\{"city": "/);
    expect(r.json.usage.completion_tokens).toBeGreaterThan(5);
  });

  it('is deterministic for a seed: the same id and arguments twice', async () => {
    const [a, b] = await Promise.all([
      post(vllm.url, '/v1/chat/completions', ask()),
      post(vllm.url, '/v1/chat/completions', ask()),
    ]);
    expect(a.json.choices[0].message.tool_calls).toEqual(b.json.choices[0].message.tool_calls);
  });

  it.each<[string, Record<string, unknown>, string, string | null]>([
    ['required', { tool_choice: 'required' }, 'tool_calls', ''],
    [
      'named (finish_reason stays "stop", as vLLM)',
      { tool_choice: { type: 'function', function: { name: 'get_weather' } } },
      'stop',
      '',
    ],
  ])('tool_choice %s → a call', async (_name, extra, finish, content) => {
    const r = await post(
      vllm.url,
      '/v1/chat/completions',
      ask({ ...extra, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(r.json.choices[0].finish_reason).toBe(finish);
    expect(r.json.choices[0].message.content).toBe(content);
    expect(r.json.choices[0].message.tool_calls[0].function.name).toBe('get_weather');
  });

  it('tool_choice none → text', async () => {
    const r = await post(vllm.url, '/v1/chat/completions', ask({ tool_choice: 'none', max_tokens: 3 }));
    expect(r.json.choices[0].message.tool_calls).toBeUndefined();
    expect(r.json.choices[0].message.content).toMatch(/^( \w+){3}$/);
  });

  it('a follow-up carrying the tool result is answered with text', async () => {
    const first = await post(vllm.url, '/v1/chat/completions', ask());
    const call = first.json.choices[0].message.tool_calls[0] as ToolCall;
    const r = await post(
      vllm.url,
      '/v1/chat/completions',
      ask({
        max_tokens: 4,
        messages: [
          ...ask().messages,
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' },
        ],
      }),
    );
    expect(r.json.choices[0].finish_reason).toBe('length');
    expect(r.json.choices[0].message.tool_calls).toBeUndefined();
    expect(r.json.choices[0].message.content).toMatch(/^( \w+){4}$/);
  });

  it('max_tokens too small for the arguments → cut, finish_reason "length"', async () => {
    const r = await post(vllm.url, '/v1/chat/completions', ask({ max_tokens: 6 }));
    expect(r.json.choices[0].finish_reason).toBe('length');
    expect(r.json.usage.completion_tokens).toBeLessThanOrEqual(6);
    expect(() => JSON.parse(r.json.choices[0].message.tool_calls[0].function.arguments as string)).toThrow();
  });

  it('SGLang: call_<24 hex> ids and the call index', async () => {
    const r = await post(sglang.url, '/v1/chat/completions', ask());
    const call = r.json.choices[0].message.tool_calls[0] as ToolCall;
    expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(call.index).toBe(0);
  });

  it('400 for a named tool that was not sent', async () => {
    const r = await post(
      vllm.url,
      '/v1/chat/completions',
      ask({ tool_choice: { type: 'function', function: { name: 'x' } } }),
    );
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('tool_choice');
  });
});

describe('tool calls (stream)', () => {
  it('role chunk, then a delta with id + type + name, then argument fragments; the same call as non-stream', async () => {
    const [s, ns] = await Promise.all([
      post(vllm.url, '/v1/chat/completions', ask({ stream: true, stream_options: { include_usage: true } })),
      post(vllm.url, '/v1/chat/completions', ask()),
    ]);
    const chunks = sseEvents(s.text).slice(0, -1) as Chunk[];
    expect(sseEvents(s.text).at(-1)).toBe('[DONE]');
    const deltas = chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0]!);
    expect(deltas[0]!.delta).toEqual({ role: 'assistant', content: '' });
    const header = deltas[1]!.delta.tool_calls![0]!;
    const expected = ns.json.choices[0].message.tool_calls[0] as ToolCall;
    expect(header).toEqual({
      index: 0,
      id: expected.id,
      type: 'function',
      function: { name: 'get_weather' },
    });
    const rest = deltas.slice(2);
    for (const d of rest) {
      expect(Object.keys(d.delta)).toEqual(['tool_calls']);
      expect(Object.keys(d.delta.tool_calls![0]!)).toEqual(['index', 'function']);
      expect(Object.keys(d.delta.tool_calls![0]!.function)).toEqual(['arguments']);
    }
    expect(rest.map((d) => d.delta.tool_calls![0]!.function.arguments).join('')).toBe(
      expected.function.arguments,
    );
    expect(rest.slice(0, -1).every((d) => d.finish_reason === null)).toBe(true);
    expect(rest.at(-1)!.finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(ns.json.usage.completion_tokens);
  });
});
