import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, post, sseEvents } from './testing/index.js';

/** finish_reason / stop_reason as vLLM reports them (ChatCompletionResponseChoice.stop_reason). */
type Choice = {
  delta?: { content?: string };
  message?: { content: string };
  text?: string;
  finish_reason: string | null;
  stop_reason?: string | null;
};
type Frame = { choices: Choice[]; usage?: { completion_tokens: number } };

const log = createLogger('sim-ending', 'silent');
let plain: RunningSimulator;
let eos: RunningSimulator;
beforeAll(async () => {
  [plain, eos] = await Promise.all([
    startSimulator({ timeScale: 0 }, log),
    startSimulator({ timeScale: 0, eosAt: 3 }, log),
  ]);
});
afterAll(async () => {
  await Promise.all([plain.close(), eos.close()]);
});

const PROMPT = 'Tell me how stop reasons work.';
const STREAM = { stream: true, stream_options: { include_usage: true } };

async function words(): Promise<string[]> {
  const r = await post(plain.url, '/v1/chat/completions', chatBody(PROMPT, { max_tokens: 6 }));
  return (r.json.choices[0].message.content as string).split(' ').slice(1);
}

describe('stop_reason', () => {
  it.each([false, true])(
    'a stop string ends the output before it; stop_reason is the string (stream %s)',
    async (stream) => {
      const stop = (await words())[2]!;
      const r = await post(
        plain.url,
        '/v1/chat/completions',
        chatBody(PROMPT, { max_tokens: 6, stop: [stop], ...(stream ? STREAM : {}) }),
      );
      const last = stream
        ? (sseEvents(r.text) as Frame[]).filter((f) => f.choices?.length).at(-1)!.choices[0]!
        : (r.json as Frame).choices[0]!;
      expect(last).toMatchObject({ finish_reason: 'stop', stop_reason: stop });
    },
  );

  it('length: stop_reason null', async () => {
    const r = await post(plain.url, '/v1/chat/completions', chatBody(PROMPT, { max_tokens: 2 }));
    expect(r.json.choices[0]).toMatchObject({ finish_reason: 'length', stop_reason: null });
  });
});

describe('--eos-at', () => {
  it.each([
    ['chat', 0, 3],
    ['chat', 5, 6], // EOS suppressed while output < min_tokens
    ['completion', 0, 3],
  ] as const)(
    '%s, min_tokens %i → %i tokens, the last one EOS (no text), stop_reason null',
    async (kind, min, n) => {
      const path = kind === 'chat' ? '/v1/chat/completions' : '/v1/completions';
      const body =
        kind === 'chat'
          ? chatBody(PROMPT, { max_tokens: 10, min_tokens: min, ...STREAM })
          : { model: 'motor-sim-7b', prompt: PROMPT, max_tokens: 10, min_tokens: min, ...STREAM };
      const r = await post(eos.url, path, body);
      const frames = (sseEvents(r.text) as Array<Frame | string>).filter(
        (f): f is Frame => typeof f !== 'string',
      );
      expect(frames.at(-1)!.usage!.completion_tokens).toBe(n);
      const end = frames.at(-2)!.choices[0]!;
      expect(end).toMatchObject({ finish_reason: 'stop', stop_reason: null });
      expect(kind === 'chat' ? end.delta!.content : end.text).toBe('');
    },
  );
});
