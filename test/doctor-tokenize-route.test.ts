import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { QWEN3_CHAT_FIXTURE, QWEN3_DIR } from '../src/model-tokenizer/testing/index.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { post } from '../src/simulator/testing/index.js';

/**
 * The simulator's vLLM `POST /tokenize` (src/simulator/tokenize-route.ts), which `motor doctor`
 * compares Motor's tokens with: with `--tokenizer` it answers the golden Qwen3 token ids (the shared
 * fixture vLLM's renderer was checked against), without it the tokens it counts as prompt_tokens.
 */

const log = createLogger('doctor-tokenize-test', 'silent');
const golden = (
  JSON.parse(readFileSync(QWEN3_CHAT_FIXTURE, 'utf8')) as {
    cases: Array<{ name: string; messages?: unknown[]; tools?: unknown; tokenIds: number[] }>;
  }
).cases.find((c) => c.messages !== undefined && c.tools === undefined)!;

let qwen: RunningSimulator;
let own: RunningSimulator;

beforeAll(async () => {
  [qwen, own] = await Promise.all([
    startSimulator({ timeScale: 0, model: 'qwen3', tokenizer: QWEN3_DIR, hashSeed: '0' }, log),
    startSimulator({ timeScale: 0, model: 'sim' }, log),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([qwen?.close(), own?.close()]);
});

describe('simulator POST /tokenize (vLLM shape)', () => {
  it('chat form with --tokenizer: the model template and tokenizer, as vLLM renders them', async () => {
    const r = await post(qwen.url, '/tokenize', { model: 'qwen3', messages: golden.messages });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      count: golden.tokenIds.length,
      max_model_len: 32768,
      tokens: golden.tokenIds,
      token_strs: null,
    });
  });

  it('its count is the prompt_tokens a generation request reports (with and without --tokenizer)', async () => {
    const messages = [{ role: 'user', content: 'How many tokens is this?' }];
    for (const [sim, model] of [
      [qwen, 'qwen3'],
      [own, 'sim'],
    ] as const) {
      const t = await post(sim.url, '/tokenize', { messages });
      const g = await post(sim.url, '/v1/chat/completions', { model, messages, max_tokens: 1 });
      expect(t.json.count).toBe(g.json.usage.prompt_tokens);
      const p = await post(sim.url, '/tokenize', { model, prompt: 'plain words here' });
      const c = await post(sim.url, '/v1/completions', { model, prompt: 'plain words here', max_tokens: 1 });
      expect(p.json.count).toBe(c.json.usage.prompt_tokens);
    }
  });

  it.each<[string, Record<string, unknown>, number, RegExp]>([
    ['another model', { model: 'other', prompt: 'x' }, 404, /The model `other` does not exist/],
    [
      'a request chat_template',
      { messages: [{ role: 'user', content: 'x' }], chat_template: '{{ 1 }}' },
      400,
      /chat_template/,
    ],
    ['non-default add_special_tokens', { prompt: 'x', add_special_tokens: false }, 400, /add_special_tokens/],
    ['no prompt', {}, 400, /'prompt' is required/],
    [
      'both continue_final_message and add_generation_prompt',
      {
        messages: [{ role: 'user', content: 'x' }],
        continue_final_message: true,
        add_generation_prompt: true,
      },
      400,
      /Cannot set both/,
    ],
  ])('refuses %s', async (_name, body, status, message) => {
    const r = await post(qwen.url, '/tokenize', body);
    expect(r.status).toBe(status);
    expect(r.json.error.message).toMatch(message);
  });
});
