import { describe, expect, it } from 'vitest';
import { textBlockHashes } from './prefix-hash.js';

/** Splits `text` at the given offsets (code units) into consecutive pieces. */
function split(text: string, at: readonly number[]): string[] {
  const out: string[] = [];
  let from = 0;
  for (const cut of at) {
    out.push(text.slice(from, cut));
    from = cut;
  }
  out.push(text.slice(from));
  return out;
}

const long = 'the coordinator routes "prefill"\n\tif (x) { y(); }\n'.repeat(40); // 2,000 units
const emoji = `${'a'.repeat(63)}😀${'b'.repeat(200)}`; // a surrogate pair across the first block end

describe('textBlockHashes of pieces', () => {
  it.each([
    ['one piece', long, [] as number[], undefined],
    ['cuts inside blocks', long, [1, 7, 500, 1999], undefined],
    ['cuts on block ends', long, [64, 128, 1984], undefined],
    ['empty pieces', long, [0, 0, 300, 300, 2000], undefined],
    ['a trailing partial block spread over pieces', long.slice(0, 150), [60, 130, 140], undefined],
    ['with a salt', long, [33, 900], 'tenant-a'],
    ['a surrogate pair split between pieces at a block end', emoji, [64], undefined],
    ['a surrogate pair whole in one piece', emoji, [63, 65], undefined],
  ])('%s: the same hashes as the joined string', (_name, text, at, salt) => {
    const whole = textBlockHashes(text, 16, salt);
    expect(whole.length).toBe(Math.floor(text.length / 64));
    expect(textBlockHashes(split(text, at), 16, salt)).toEqual(whole);
  });
  it('no pieces: no blocks', () => {
    expect(textBlockHashes([], 16)).toEqual([]);
  });
});
