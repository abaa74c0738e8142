import { describe, expect, it } from 'vitest';
import {
  EOS_WORD,
  hashMore,
  hashString,
  OUTPUT_VOCAB,
  outputText,
  outputTokenIds,
  planOutput,
  promptContext,
  renderChat,
  tokenize,
} from './tokens.js';

const CTX = hashString('<|user|>hi\n<|assistant|>\n');

describe('tokens', () => {
  it('renders the documented chat template', () => {
    expect(
      renderChat([
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ]),
    ).toBe('<|system|>be brief\n<|user|>hi\n<|assistant|>\n');
  });

  it.each([
    // continueFinal, addGenerationPrompt → rendering
    [true, false, '<|user|>hi\n<|assistant|>\n the'],
    [false, false, '<|user|>hi\n<|assistant|> the\n'],
    [false, true, '<|user|>hi\n<|assistant|> the\n<|assistant|>\n'],
  ] as const)(
    'continue_final_message %s, add_generation_prompt %s',
    (continueFinal, addGenerationPrompt, out) => {
      const msgs = [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: ' the' },
      ];
      expect(renderChat(msgs, { continueFinal, addGenerationPrompt })).toBe(out);
    },
  );

  it('a continued final message is the generation prompt plus its content', () => {
    const user = [{ role: 'user', content: 'hi' }];
    expect(renderChat([...user, { role: 'assistant', content: ' a b' }], { continueFinal: true })).toBe(
      renderChat(user) + ' a b',
    );
  });

  it('tokenises special-token text as plain text', () => {
    expect(tokenize('<|endoftext|>').length).toBeGreaterThan(1);
    expect(tokenize('hello world')).toEqual([15339, 1917]);
  });

  it('every output word is exactly one token', () => {
    expect(OUTPUT_VOCAB.text.length).toBeGreaterThan(100);
    OUTPUT_VOCAB.text.forEach((t, i) => {
      if (i !== EOS_WORD) expect(tokenize(t)).toEqual([OUTPUT_VOCAB.ids[i]]);
    });
  });

  it.each([
    // seed, max, stop, min, natural → length, finish
    [1, 5, null, 0, false, 5, 'length'],
    [1, 5, null, 0, true, 5, 'stop'],
    [2, 1, null, 0, false, 1, 'length'],
  ] as const)('seed %i max %i → %i tokens', (seed, max, stop, min, natural, len, finish) => {
    const lim = (eosAt: number) => ({ maxTokens: max, stop, minTokens: min, naturalStop: natural, eosAt });
    const p = planOutput(seed, CTX, lim(0));
    expect(p.words.length).toBe(len);
    expect(p.finishReason).toBe(finish);
    expect(outputText(p.words)).toBe(outputText(planOutput(seed, CTX, lim(0)).words));
    expect(outputTokenIds(p.words)).toHaveLength(len);
  });

  it('stop words end output before the word, but not before min_tokens', () => {
    const full = planOutput(3, CTX, lim(10, null, 0));
    const third = OUTPUT_VOCAB.text[full.words[2]!]!.slice(1);
    const firstIdx = Array.from(full.words).findIndex((w) => OUTPUT_VOCAB.text[w]!.slice(1) === third);
    const stopped = planOutput(3, CTX, lim(10, new Set([third]), 0));
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.words.length).toBe(firstIdx);
    expect(stopped.stopReason).toBe(third);
    const withMin = planOutput(3, CTX, lim(10, new Set([third]), 10));
    expect(withMin.words.length).toBe(10);
  });
});

const lim = (maxTokens: number, stop: Set<string> | null, minTokens: number, eosAt = 0) => ({
  maxTokens,
  stop,
  minTokens,
  naturalStop: false,
  eosAt,
});

describe('--eos-at', () => {
  it.each([
    // max, min, eosAt → tokens (EOS last), finish
    [10, 0, 1, 1, 'stop'],
    [10, 0, 3, 3, 'stop'],
    [10, 2, 1, 3, 'stop'], // EOS suppressed while output < min_tokens, then it comes at once
    [10, 1, 1, 2, 'stop'], // min_tokens 1 (vllm-ascend proxies) keeps a one-token prefill from EOS
    [2, 0, 5, 2, 'length'],
    [1, 1, 1, 1, 'length'],
  ] as const)('max %i min %i eos-at %i → %i tokens, %s', (max, min, eosAt, len, finish) => {
    const p = planOutput(7, CTX, lim(max, null, min, eosAt));
    expect(p.words.length).toBe(len);
    expect(p.finishReason).toBe(finish);
    expect(p.stopReason).toBeNull();
    expect(p.words[len - 1] === EOS_WORD).toBe(finish === 'stop');
    if (finish === 'stop') expect(outputText(p.words.subarray(len - 1))).toBe(''); // EOS has no text
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

describe('output is a function of the context (issue 16)', () => {
  const limits = (maxTokens: number) => lim(maxTokens, null, 0);
  it.each([0, 1, 5, 19])('continuing after %i words gives the rest of the uninterrupted output', (k) => {
    for (const seed of [0, 7]) {
      const full = planOutput(seed, CTX, limits(20));
      const sent = outputText(full.words.subarray(0, k));
      const rest = planOutput(seed, hashMore(CTX, sent), limits(20 - k));
      expect(sent + outputText(rest.words)).toBe(outputText(full.words));
    }
  });

  it('token-id prompts continue the context their text has', () => {
    const text = 'hello world';
    expect(promptContext(null, tokenize(text))).toBe(promptContext(text, []));
    expect(promptContext(null, [999_999_999])).toBeTypeOf('number'); // outside the vocabulary: no throw
  });

  it('the request seed and the prompt both change the output', () => {
    const a = outputText(planOutput(1, CTX, limits(8)).words);
    expect(outputText(planOutput(2, CTX, limits(8)).words)).not.toBe(a);
    expect(outputText(planOutput(1, hashString('other'), limits(8)).words)).not.toBe(a);
  });
});
