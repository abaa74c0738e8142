import { describe, expect, it } from 'vitest';
import { engineRequestIdCandidates, findByCandidates, requestIdForm } from './engine-request-id.js';

/** Motor's engine request id (`{root}#a<n>`) as vLLM reports it back, by endpoint and release. */
const BARE = 'req-7f3a#a2';

describe('engineRequestIdCandidates', () => {
  // [reported id, the candidate that must match BARE's issuer]
  it.each([
    ['bare (X-Request-Id echoed)', BARE],
    ['chat, vLLM ≤ 0.13 / vllm-ascend ≥ 0.15 (suffix stripped)', `chatcmpl-${BARE}`],
    ['chat, vllm-ascend v0.14.0rc1 (random suffix)', `chatcmpl-${BARE}-9c41e0a7`],
    ['completions, prompt 0', `cmpl-${BARE}-0`],
    ['completions, prompt 12', `cmpl-${BARE}-12`],
    ['completions with random suffix', `cmpl-${BARE}-3-0a1b2c3d`],
    ['completions whose suffix is all digits', `cmpl-${BARE}-0-12345678`],
  ])('%s: %s', (_name, reported) => {
    const candidates = engineRequestIdCandidates(reported);
    expect(candidates[0]).toBe(reported);
    expect(candidates).toContain(BARE);
    expect(new Set(candidates).size).toBe(candidates.length);
  });

  it.each([
    // An id that itself ends like vLLM's random suffix or a prompt index: the literal form comes
    // first, so exact matching against issued ids picks it over the stripped one.
    ['job-deadbeef', 'chatcmpl-job-deadbeef', ['chatcmpl-job-deadbeef', 'job-deadbeef', 'job']],
    [
      'job-deadbeef',
      'chatcmpl-job-deadbeef-0a1b2c3d',
      ['chatcmpl-job-deadbeef-0a1b2c3d', 'job-deadbeef-0a1b2c3d', 'job-deadbeef'],
    ],
    ['run-5', 'cmpl-run-5-0', ['cmpl-run-5-0', 'run-5-0', 'run-5']],
  ])('an id %s reported as %s', (bare, reported, expected) => {
    const candidates = engineRequestIdCandidates(reported);
    expect(candidates).toEqual(expected);
    expect(findByCandidates(candidates, (id) => (id === bare ? id : undefined))?.id).toBe(bare);
  });

  it('only the two endpoint prefixes are stripped', () => {
    expect(engineRequestIdCandidates('embd-x-0a1b2c3d')).toEqual(['embd-x-0a1b2c3d']);
    expect(engineRequestIdCandidates('chatcmpl-')).toEqual(['chatcmpl-']);
  });
});

describe('findByCandidates', () => {
  it('returns the first known candidate in order, or undefined', () => {
    const known = new Map([
      ['b', 2],
      ['c', 3],
    ]);
    expect(findByCandidates(['a', 'c', 'b'], (id) => known.get(id))).toEqual({ id: 'c', value: 3 });
    expect(findByCandidates(['a'], (id) => known.get(id))).toBeUndefined();
  });
});

describe('requestIdForm', () => {
  it.each([
    [BARE, 'bare'],
    [`chatcmpl-${BARE}`, 'chat'],
    [`chatcmpl-${BARE}-9c41e0a7`, 'chat_suffixed'],
    [`cmpl-${BARE}-0`, 'completions'],
    [`cmpl-${BARE}-12`, 'completions'],
    [`cmpl-${BARE}-3-0a1b2c3d`, 'completions_suffixed'],
    [`cmpl-${BARE}-0-12345678`, 'completions_suffixed'],
  ])('%s → %s', (reported, form) => {
    expect(requestIdForm(reported, BARE)).toBe(form);
  });
});
