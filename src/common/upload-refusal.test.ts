import { describe, expect, it } from 'vitest';
import { isUploadRefusal, UPLOAD_REFUSAL_MIN_CHARS } from './upload-refusal.js';

const big = UPLOAD_REFUSAL_MIN_CHARS;
const err = (code?: string): Error => Object.assign(new Error('x'), code ? { code } : {});

describe('isUploadRefusal', () => {
  it.each([
    ['EPIPE on a large body', err('EPIPE'), big, true],
    ['ECONNRESET on a large body', err('ECONNRESET'), big, true],
    ['undici "other side closed" on a large body', err('UND_ERR_SOCKET'), big, true],
    ['a reset on a body just under the bound', err('ECONNRESET'), big - 1, false],
    ['a reset on a small body', err('ECONNRESET'), 200, false],
    ['connection refused (nothing was uploaded)', err('ECONNREFUSED'), big, false],
    ['a connect timeout', err('UND_ERR_CONNECT_TIMEOUT'), big, false],
    ['an error without a code', err(), big, false],
    ['not an error', null, big, false],
  ])('%s → %s', (_name, e, chars, expected) => {
    expect(isUploadRefusal(e, chars)).toBe(expected);
  });
});
