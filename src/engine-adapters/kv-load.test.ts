import { expect, it } from 'vitest';
import { decodeKvLoad } from './kv-load.js';

it.each([
  ['all loaded', { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 100 } }, 'loaded'],
  ['last block recomputed', { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 96 } }, 'loaded'],
  [
    'recomputed (silent P/D failure)',
    { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 0 } },
    'not_loaded',
  ],
  [
    'a small local prefix hit only',
    { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 16 } },
    'not_loaded',
  ],
  ['no details (no --enable-prompt-tokens-details)', { prompt_tokens: 100 }, 'unknown'],
  ['details null', { prompt_tokens: 100, prompt_tokens_details: null }, 'unknown'],
  ['no usage', undefined, 'unknown'],
  ['empty prompt', { prompt_tokens: 0, prompt_tokens_details: { cached_tokens: 0 } }, 'unknown'],
])('%s → %s', (_name, usage, verdict) => {
  expect(decodeKvLoad(usage).verdict).toBe(verdict);
});
