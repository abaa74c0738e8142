import { describe, expect, it } from 'vitest';
import { bodyLength, undiciBody, type RequestBody } from './request-body.js';

const kib = (n: number, fill = 'a'): Buffer => Buffer.alloc(n * 1024, fill);

describe('undiciBody', () => {
  it.each<[string, RequestBody, 'same' | 'joined' | 'list']>([
    ['a string as is', '{"a":1}', 'same'],
    ['a Buffer as is', Buffer.from('{"a":1}'), 'same'],
    ['a list of one: its buffer', [Buffer.from('{"a":1}')], 'joined'],
    ['a short list: joined', [Buffer.from('{"a":'), Buffer.from('1}')], 'joined'],
    ['a list of 24 KiB or more: kept, with content-length', [kib(20), kib(4, 'b')], 'list'],
  ])('%s', (_n, body, want) => {
    const out = undiciBody(body, { 'content-type': 'application/json' });
    if (want === 'same') {
      expect(out.body).toBe(body);
      expect(out.headers).toEqual({ 'content-type': 'application/json' });
      return;
    }
    const parts = body as readonly Buffer[];
    if (want === 'joined') {
      expect(Buffer.isBuffer(out.body)).toBe(true);
      expect(out.body).toEqual(Buffer.concat(parts));
      expect(out.headers).not.toHaveProperty('content-length');
    } else {
      expect(out.body).toBe(body);
      expect(out.headers).toEqual({
        'content-type': 'application/json',
        'content-length': String(24 * 1024),
      });
    }
  });

  it.each<[RequestBody | undefined, number]>([
    [undefined, 0],
    ['héllo', 5],
    [Buffer.from('héllo'), 6],
    [[Buffer.from('ab'), Buffer.from('cde')], 5],
  ])('bodyLength(%j) = %i', (body, n) => expect(bodyLength(body)).toBe(n));
});
