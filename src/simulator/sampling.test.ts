import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, post, sseEvents } from './testing/index.js';

/** n > 1, logprobs and echo as vLLM's OpenAI server shapes them (answer.ts, chunk-writer.ts, final-choice.ts). */
const log = createLogger('sim-sampling', 'silent');
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timeScale: 0 }, log);
});
afterAll(async () => {
  await sim.close();
});

type LpEntry = {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number }>;
};
type Frame = {
  choices: Array<{
    index: number;
    delta?: { content?: string; role?: string };
    text?: string;
    finish_reason: string | null;
  }>;
  usage?: { completion_tokens: number };
};
const CHAT = chatBody('Name some rivers.', { max_tokens: 5, seed: 11 });
const COMPLETION = { model: 'motor-sim-7b', prompt: 'Rivers:', max_tokens: 4, seed: 11 };

describe('n > 1', () => {
  it.each<[string, string, Record<string, unknown>]>([
    ['chat', '/v1/chat/completions', CHAT],
    ['completions', '/v1/completions', COMPLETION],
  ])(
    '%s: n choices with their indices; choice 0 is the n=1 answer; usage counts all',
    async (_k, path, body) => {
      const [one, three] = await Promise.all([
        post(sim.url, path, body),
        post(sim.url, path, { ...body, n: 3 }),
      ]);
      const text = (c: { message?: { content: string }; text?: string }) => c.message?.content ?? c.text;
      expect(three.json.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2]);
      expect(text(three.json.choices[0])).toBe(text(one.json.choices[0]));
      expect(new Set(three.json.choices.map(text)).size).toBe(3);
      expect(three.json.usage.completion_tokens).toBe(3 * one.json.usage.completion_tokens);
      expect(three.json.usage.prompt_tokens).toBe(one.json.usage.prompt_tokens);
    },
  );

  it('chat stream: a role chunk per choice, then each step once per choice; texts as non-stream', async () => {
    const body = { ...CHAT, n: 2 };
    const [s, ns] = await Promise.all([
      post(sim.url, '/v1/chat/completions', {
        ...body,
        stream: true,
        stream_options: { include_usage: true },
      }),
      post(sim.url, '/v1/chat/completions', body),
    ]);
    const frames = sseEvents(s.text).slice(0, -1) as Frame[];
    const choices = frames.filter((f) => f.choices.length > 0).map((f) => f.choices);
    expect(choices.every((c) => c.length === 1)).toBe(true);
    expect(choices.map((c) => c[0]!.index)).toEqual([0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    expect(choices.slice(0, 2).map((c) => c[0]!.delta!.role)).toEqual(['assistant', 'assistant']);
    for (const k of [0, 1]) {
      const mine = choices.filter((c) => c[0]!.index === k).map((c) => c[0]!);
      expect(mine.map((c) => c.delta!.content).join('')).toBe(ns.json.choices[k].message.content);
      expect(mine.at(-1)!.finish_reason).toBe('length');
    }
    expect(frames.at(-1)!.usage!.completion_tokens).toBe(10);
  });
});

describe('logprobs', () => {
  it.each([0, 3])(
    'chat top_logprobs %d: one entry per token, the sampled token first, descending',
    async (top) => {
      const r = await post(sim.url, '/v1/chat/completions', { ...CHAT, logprobs: true, top_logprobs: top });
      const content = r.json.choices[0].logprobs.content as LpEntry[];
      expect(content).toHaveLength(5);
      expect(content.map((e) => e.token).join('')).toBe(r.json.choices[0].message.content);
      for (const e of content) {
        expect(e.logprob).toBeLessThanOrEqual(0);
        expect(e.bytes).toEqual([...Buffer.from(e.token)]);
        expect(e.top_logprobs).toHaveLength(top);
        if (top > 0) expect(e.top_logprobs[0]).toMatchObject({ token: e.token, logprob: e.logprob });
        const lps = e.top_logprobs.map((t) => t.logprob);
        expect([...lps].sort((a, b) => b - a)).toEqual(lps);
      }
    },
  );

  it('deterministic: the stream carries the same entries as the body', async () => {
    const body = { ...CHAT, logprobs: true, top_logprobs: 2 };
    const [s, ns] = await Promise.all([
      post(sim.url, '/v1/chat/completions', { ...body, stream: true }),
      post(sim.url, '/v1/chat/completions', body),
    ]);
    const frames = sseEvents(s.text).slice(1, -1) as Array<{
      choices: Array<{ logprobs: { content: LpEntry[] } }>;
    }>;
    expect(frames.flatMap((f) => f.choices[0]!.logprobs.content)).toEqual(
      ns.json.choices[0].logprobs.content,
    );
  });

  it('completions logprobs N: tokens, token_logprobs, top_logprobs dicts, cumulative text_offset', async () => {
    const r = await post(sim.url, '/v1/completions', { ...COMPLETION, logprobs: 2 });
    const lp = r.json.choices[0].logprobs;
    expect(lp.tokens.join('')).toBe(r.json.choices[0].text);
    expect(lp.token_logprobs).toHaveLength(4);
    expect(lp.top_logprobs.every((d: Record<string, number>) => Object.keys(d).length === 2)).toBe(true);
    let at = 0;
    expect(lp.text_offset).toEqual(lp.tokens.map((t: string) => ((at += t.length), at - t.length)));
  });

  it('400 for top_logprobs without logprobs, or above 20', async () => {
    for (const extra of [{ top_logprobs: 2 }, { logprobs: true, top_logprobs: 21 }]) {
      expect((await post(sim.url, '/v1/chat/completions', { ...CHAT, ...extra })).status).toBe(400);
    }
  });
});

describe('echo (completions)', () => {
  it('the text starts with the prompt, non-stream and stream', async () => {
    const [ns, s, plain] = await Promise.all([
      post(sim.url, '/v1/completions', { ...COMPLETION, echo: true }),
      post(sim.url, '/v1/completions', { ...COMPLETION, echo: true, stream: true }),
      post(sim.url, '/v1/completions', COMPLETION),
    ]);
    expect(ns.json.choices[0].text).toBe('Rivers:' + plain.json.choices[0].text);
    const frames = sseEvents(s.text).slice(0, -1) as Frame[];
    expect(frames[0]!.choices[0]!.text!.startsWith('Rivers:')).toBe(true);
    expect(frames.map((f) => f.choices[0]!.text).join('')).toBe(ns.json.choices[0].text);
  });
});
