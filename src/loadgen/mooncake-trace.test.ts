import { describe, expect, it } from 'vitest';
import { renderChat, tokenize } from '../simulator/tokens.js';
import {
  MOONCAKE_BLOCK_TOKENS as B,
  blockText,
  createTraceWorkload,
  parseMooncakeTrace,
  traceArrivals,
  tracePrompt,
  type TraceRecord,
} from './mooncake-trace.js';
import { WORDS } from './workloads.js';

const line = (o: Record<string, unknown>): string => JSON.stringify(o);
const rec = (timestamp: number, input_length: number, hash_ids: number[], output_length = 8): string =>
  line({ timestamp, input_length, output_length, hash_ids });

describe('parseMooncakeTrace', () => {
  it('reads records, skipping blank lines and ignoring extra fields', () => {
    const text = `${rec(0, 1000, [1, 2])}\n\n${line({ timestamp: 27.5, input_length: 512, output_length: 0, hash_ids: [1], x: 'y' })}\n`;
    expect(parseMooncakeTrace(text)).toEqual([
      { timestampMs: 0, inputLength: 1000, outputLength: 8, hashIds: [1, 2] },
      { timestampMs: 27.5, inputLength: 512, outputLength: 0, hashIds: [1] },
    ]);
  });

  const BAD: [name: string, text: string, error: string][] = [
    ['empty', '\n\n', 'trace has no records'],
    ['not JSON', `${rec(0, 10, [1])}\n{oops`, 'trace line 2: not JSON'],
    ['array', '[1,2]', 'trace line 1: not a JSON object'],
    ['no timestamp', line({ input_length: 10, output_length: 1, hash_ids: [1] }), 'timestamp must be'],
    ['negative timestamp', rec(-1, 10, [1]), 'timestamp must be'],
    ['zero input', rec(0, 0, []), 'input_length must be an integer ≥ 1'],
    ['fractional input', rec(0, 1.5, [1]), 'input_length must be'],
    ['negative output', rec(0, 10, [1], -1), 'output_length must be'],
    [
      'string ids',
      line({ timestamp: 0, input_length: 10, output_length: 1, hash_ids: ['a'] }),
      'hash_ids must be',
    ],
    ['too few ids', rec(0, 1025, [1, 2]), 'hash_ids has 2 ids, input_length 1025 needs ceil(1025/512) = 3'],
    ['too many ids', rec(0, 512, [1, 2]), 'hash_ids has 2 ids'],
    [
      'time going back',
      `${rec(5, 10, [1])}\n${rec(4, 10, [2])}`,
      'trace line 2: timestamp 4 is before the previous 5',
    ],
  ];
  it.each(BAD)('rejects %s', (_name, text, error) => {
    expect(() => parseMooncakeTrace(text)).toThrow(error);
  });
});

describe('traceArrivals', () => {
  it('offsets from the first record, multiplied by the time scale', () => {
    const records = parseMooncakeTrace(
      [rec(1000, 10, [1]), rec(1500, 10, [2]), rec(3000, 10, [3])].join('\n'),
    );
    expect(traceArrivals(records, 1)).toEqual([0, 500, 2000]);
    expect(traceArrivals(records, 0.1)).toEqual([0, 50, 200]);
    expect(traceArrivals(records, 0)).toEqual([0, 0, 0]);
    expect(() => traceArrivals(records, -1)).toThrow('time scale must be a number ≥ 0');
  });
});

describe('synthetic prompts', () => {
  it('every word is one token of the simulator tokenizer', () => {
    expect(WORDS.filter((w) => tokenize(' ' + w).length !== 1)).toEqual([]);
  });

  it('a block of hash id h is exactly 512 simulator tokens, and prompts add the chat template only', () => {
    const t = blockText(7, 42, B);
    expect(tokenize(t)).toHaveLength(B);
    const r: TraceRecord = { timestampMs: 0, inputLength: 2 * B + 100, outputLength: 4, hashIds: [1, 2, 3] };
    const prompt = tracePrompt(7, r);
    expect(tokenize(prompt)).toHaveLength(r.inputLength);
    // the template around a one-word message (`<|user|>` … `\n<|assistant|>\n`): 11 tokens
    const overhead = tokenize(renderChat([{ role: 'user', content: ' the' }])).length - 1;
    expect(overhead).toBe(11);
    expect(tokenize(renderChat([{ role: 'user', content: prompt }]))).toHaveLength(r.inputLength + overhead);
  });

  it('shared hash ids at shared positions give byte-identical prefixes, others diverge at once', () => {
    const a = tracePrompt(1, { timestampMs: 0, inputLength: 3 * B, outputLength: 1, hashIds: [10, 11, 12] });
    const b = tracePrompt(1, {
      timestampMs: 0,
      inputLength: 2 * B + 7,
      outputLength: 1,
      hashIds: [10, 11, 99],
    });
    const c = tracePrompt(1, { timestampMs: 0, inputLength: 3 * B, outputLength: 1, hashIds: [20, 11, 12] });
    const wordsOf = (s: string): string[] => s.split(' ').slice(1);
    const common = (x: string[], y: string[]): number => {
      let i = 0;
      while (i < x.length && x[i] === y[i]) i++;
      return i;
    };
    expect(a.slice(0, blockText(1, 10, B).length * 2)).toBe(b.slice(0, blockText(1, 10, B).length * 2));
    expect(common(wordsOf(a), wordsOf(b))).toBeLessThan(2 * B + 5);
    expect(common(wordsOf(a), wordsOf(c))).toBeLessThan(5);
    // a partial last block is the head of that id's full block; the seed changes every block
    expect(blockText(1, 12, B).startsWith(blockText(1, 12, 100))).toBe(true);
    expect(blockText(2, 10, B)).not.toBe(blockText(1, 10, B));
  });

  it('the workload sends record i with max_tokens = output_length, capped, at least 1', () => {
    const records = parseMooncakeTrace(
      [rec(0, 600, [1, 2], 50), rec(10, 600, [1, 3], 500), rec(20, 10, [4], 0)].join('\n'),
    );
    const w = createTraceWorkload(records, { seed: 3, maxTokensCap: 128 });
    expect(w.name).toBe('mooncake-trace');
    expect(w.settings).toMatchObject({ seed: 3, maxTokens: 128, traceRecords: 3 });
    expect([0, 1, 2].map((i) => w.request(i).maxTokens)).toEqual([50, 128, 1]);
    expect(w.request(1).messages).toEqual([{ role: 'user', content: tracePrompt(3, records[1]!) }]);
    expect(w.request(0)).toEqual(w.request(0));
    expect(() => w.request(3)).toThrow('trace has no record 3');
  });
});
