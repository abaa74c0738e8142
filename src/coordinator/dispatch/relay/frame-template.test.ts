import { afterEach, describe, expect, it, vi } from 'vitest';
import { FrameTemplate } from './frame-template.js';

const KEY = Buffer.from('"content":');
// prefix 59 bytes, suffix 41: both end in a partial word, so word and byte compares are both exercised
const frame = (value: string, id = 'c-1'): string =>
  `data: {"id":"${id}","choices":[{"index":0,"delta":{"content":${value}},"logprobs":null,"finish_reason":null}]}`;
const PREFIX_LEN = frame('"a"').indexOf('"content":') + KEY.length;
const template = (): FrameTemplate => FrameTemplate.around(Buffer.from(frame('"learnt"')), KEY)!;
const B = (text: string): Buffer => Buffer.from(text);
/** `buf` with the byte at `at` changed (negative: from the end). */
const flip = (buf: Buffer, at: number): Buffer => {
  const k = at < 0 ? buf.length + at : at;
  buf[k] = buf[k] === 0x41 ? 0x42 : 0x41;
  return buf;
};

describe('FrameTemplate.textAt', () => {
  const one = frame('"x"');
  it.each<[string, Buffer, number, string | null]>([
    ['the same shape, another text', B(frame('"hello"') + '\n\n'), 0, 'hello'],
    ['the last frame, no separator', B(frame('"z"')), 0, 'z'],
    ['a frame after another', B(one + '\n\n' + frame('"y"') + '\n\n'), one.length + 2, 'y'],
    ['escapes decoded', B(frame('"\\"q\\" \\u00e9\\n"') + '\n\n'), 0, '"q" é\n'],
    ['raw multi-byte text', B(frame('"日本🙂"')), 0, '日本🙂'],
    ['an empty string', B(frame('""') + '\n\n'), 0, ''],
    ['another id (a whole word differs)', B(frame('"x"', 'c-2') + '\n\n'), 0, null],
    ['the first byte differs', flip(B(frame('"x"')), 0), 0, null],
    ['the prefix’s last byte differs', flip(B(frame('"x"')), PREFIX_LEN - 1), 0, null],
    ['the suffix’s first byte differs', flip(B(frame('"x"')), PREFIX_LEN + 3), 0, null],
    ['the suffix’s last byte differs', flip(B(frame('"x"')), -1), 0, null],
    ['not a string', B(frame('null') + '\n\n'), 0, null],
    ['a raw control byte', B(frame('"a\tb"')), 0, null],
    ['an invalid escape', B(frame('"\\x"')), 0, null],
    ['one newline after, not a separator', B(frame('"x"') + '\n'), 0, null],
    ['cut short', B(frame('"x"').slice(0, -1)), 0, null],
  ])('%s', (_name, buf, from, want) => {
    const t = template();
    expect(t.textAt(buf, from)).toBe(want);
    if (want === null) return;
    const end = buf.indexOf('\n\n', from);
    expect(t.next).toBe(end < 0 ? buf.length : end + 2);
    // a second read through the same template (its words made by the first) reads the same
    expect(t.textAt(buf, from)).toBe(want);
  });

  describe('words are made only for a template that reads', () => {
    afterEach(() => vi.restoreAllMocks());
    it('learning a template reads no words; its first read makes them once', () => {
      const words = vi.spyOn(DataView.prototype, 'getUint32');
      const t = template();
      expect(words).not.toHaveBeenCalled();
      const buf = Buffer.from(frame('"hi"'));
      expect(t.textAt(buf, 0)).toBe('hi');
      const first = words.mock.calls.length;
      expect(t.textAt(buf, 0)).toBe('hi');
      // a read compares each word once; the first read also made them
      expect(words.mock.calls.length - first).toBe(first / 2);
    });
  });
});
