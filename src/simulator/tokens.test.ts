import { describe, expect, it } from 'vitest';
import { OUTPUT_VOCAB, outputText, outputTokenIds, planOutput, renderChat, tokenize } from './tokens.js';

describe('tokens', () => {
  it('renders the documented chat template', () => {
    expect(
      renderChat([
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ]),
    ).toBe('<|system|>be brief\n<|user|>hi\n<|assistant|>\n');
  });

  it('tokenises special-token text as plain text', () => {
    expect(tokenize('<|endoftext|>').length).toBeGreaterThan(1);
    expect(tokenize('hello world')).toEqual([15339, 1917]);
  });

  it('every output word is exactly one token', () => {
    expect(OUTPUT_VOCAB.text.length).toBeGreaterThan(100);
    OUTPUT_VOCAB.text.forEach((t, i) => expect(tokenize(t)).toEqual([OUTPUT_VOCAB.ids[i]]));
  });

  it.each([
    // seed, max, stop, min, natural → length, finish
    [1, 5, null, 0, false, 5, 'length'],
    [1, 5, null, 0, true, 5, 'stop'],
    [2, 1, null, 0, false, 1, 'length'],
  ] as const)('seed %i max %i → %i tokens', (seed, max, stop, min, natural, len, finish) => {
    const p = planOutput(seed, max, stop, min, natural);
    expect(p.words.length).toBe(len);
    expect(p.finishReason).toBe(finish);
    expect(outputText(p.words)).toBe(outputText(planOutput(seed, max, stop, min, natural).words));
    expect(outputTokenIds(p.words)).toHaveLength(len);
  });

  it('stop words end output before the word, but not before min_tokens', () => {
    const full = planOutput(3, 10, null, 0, false);
    const third = OUTPUT_VOCAB.text[full.words[2]!]!.slice(1);
    const firstIdx = Array.from(full.words).findIndex((w) => OUTPUT_VOCAB.text[w]!.slice(1) === third);
    const stopped = planOutput(3, 10, new Set([third]), 0, false);
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.words.length).toBe(firstIdx);
    const withMin = planOutput(3, 10, new Set([third]), 10, false);
    expect(withMin.words.length).toBe(10);
  });
});

describe('tokenize on hostile input', () => {
  it('encodes a 300k-character run without blocking for seconds, and short text exactly as before', () => {
    const t0 = performance.now();
    const tokens = tokenize('x'.repeat(300_000) + ' tail');
    expect(performance.now() - t0).toBeLessThan(20_000); // one-piece BPE takes minutes here (~1 s in pieces)
    expect(tokens.length).toBeGreaterThan(300_000 / 256);
    expect(tokenize('hello world')).toEqual(tokenize('hello').concat(tokenize(' world')));
  });
});
