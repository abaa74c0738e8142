import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import type { SimOptions } from './options.js';
import { thinkingOn, type ReasoningParser } from './reasoning.js';
import type { GenRequest } from './request-body.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, post, sseEvents } from './testing/index.js';

describe('thinkingOn', () => {
  const g = (kind: GenRequest['kind'], enableThinking: boolean | null) =>
    ({ kind, enableThinking }) as GenRequest;
  it.each<[ReasoningParser | null, GenRequest['kind'], boolean | null, boolean]>([
    [null, 'chat', true, false],
    ['qwen3', 'chat', null, true],
    ['qwen3', 'chat', true, true],
    ['qwen3', 'chat', false, false],
    ['deepseek_r1', 'chat', false, true],
    ['qwen3', 'completion', null, false],
    ['qwen3', 'generate', null, false],
  ])('parser %s, %s, enable_thinking %s → %s', (parser, kind, enable, on) => {
    expect(thinkingOn(parser, g(kind, enable))).toBe(on);
  });
});

type Delta = {
  role?: string;
  content?: string;
  reasoning?: string;
  reasoning_content?: string;
  tool_calls?: unknown[];
};
type Frame = { choices: Array<{ delta: Delta; finish_reason: string | null }> };

const log = createLogger('sim-reasoning', 'silent');
const sims: Record<string, RunningSimulator> = {};
const CONFIGS: Record<string, Partial<SimOptions>> = {
  newest: { reasoningParser: 'qwen3' },
  compat: { reasoningParser: 'qwen3', engineVersion: 'nixl-2026-01' },
  sglang: { reasoningParser: 'qwen3', engine: 'sglang' },
  off: {},
};
beforeAll(async () => {
  await Promise.all(
    Object.entries(CONFIGS).map(async ([k, o]) => {
      sims[k] = await startSimulator({ timeScale: 0, ...o }, log);
    }),
  );
});
afterAll(async () => {
  await Promise.all(Object.values(sims).map((s) => s.close()));
});

const BODY = chatBody('Think about rivers.', { max_tokens: 8, seed: 5 });

describe('reasoning output', () => {
  it.each<[string, string[]]>([
    ['newest', ['reasoning']],
    ['compat', ['reasoning', 'reasoning_content']],
    ['sglang', ['reasoning_content']],
  ])('%s: the first half of the words is reasoning under %j, the rest content', async (name, keys) => {
    const [r, plain] = await Promise.all([
      post(sims[name]!.url, '/v1/chat/completions', BODY),
      post(sims.off!.url, '/v1/chat/completions', BODY),
    ]);
    const m = r.json.choices[0].message as Record<string, string>;
    const words = (plain.json.choices[0].message.content as string).match(/ \w+/g)!;
    for (const k of keys) expect(m[k]).toBe(words.slice(0, 4).join(''));
    for (const k of ['reasoning', 'reasoning_content'].filter((x) => !keys.includes(x)))
      expect(m).not.toHaveProperty(k);
    expect(m.content).toBe(words.slice(4).join(''));
    expect(r.json.usage.completion_tokens).toBe(8);
  });

  it('stream: reasoning deltas first, then content deltas; the same texts as non-stream', async () => {
    const [s, ns] = await Promise.all([
      post(sims.newest!.url, '/v1/chat/completions', { ...BODY, stream: true }),
      post(sims.newest!.url, '/v1/chat/completions', BODY),
    ]);
    const deltas = (sseEvents(s.text).slice(0, -1) as Frame[]).map((f) => f.choices[0]!.delta).slice(1);
    const kinds = deltas.map((d) => Object.keys(d).join(','));
    expect(kinds).toEqual([...Array<string>(4).fill('reasoning'), ...Array<string>(4).fill('content')]);
    expect(deltas.map((d) => d.reasoning ?? '').join('')).toBe(ns.json.choices[0].message.reasoning);
    expect(deltas.map((d) => d.content ?? '').join('')).toBe(ns.json.choices[0].message.content);
  });

  it('chat_template_kwargs.enable_thinking false (qwen3) → no reasoning, the same words as content', async () => {
    const body = { ...BODY, chat_template_kwargs: { enable_thinking: false } };
    const [r, plain] = await Promise.all([
      post(sims.newest!.url, '/v1/chat/completions', body),
      post(sims.off!.url, '/v1/chat/completions', BODY),
    ]);
    expect(r.json.choices[0].message).not.toHaveProperty('reasoning');
    expect(r.json.choices[0].message.content).toBe(plain.json.choices[0].message.content);
  });

  it('with a tool call: the reasoning deltas come before the call', async () => {
    const tools = [
      { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } },
    ];
    const r = await post(sims.newest!.url, '/v1/chat/completions', {
      ...BODY,
      max_tokens: undefined,
      tools,
      tool_choice: 'required',
      stream: true,
    });
    const deltas = (sseEvents(r.text).slice(0, -1) as Frame[]).map((f) => f.choices[0]!.delta).slice(1);
    const firstCall = deltas.findIndex((d) => d.tool_calls !== undefined);
    expect(firstCall).toBeGreaterThan(0);
    expect(deltas.slice(0, firstCall).every((d) => typeof d.reasoning === 'string')).toBe(true);
  });

  it('completions have no reasoning part', async () => {
    const r = await post(sims.newest!.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
    });
    expect(r.json.choices[0].text).toMatch(/^( \w+){4}$/);
  });
});
