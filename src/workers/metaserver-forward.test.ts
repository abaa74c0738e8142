import { describe, expect, it } from 'vitest';
import { metaserverToken } from './metaserver-forward.js';

describe('metaserverToken', () => {
  it.each([
    ['POST', '/v1/metaserver/abc_DEF-123', 'abc_DEF-123'],
    ['POST', '/v1/metaserver/abc?x=1', 'abc'],
    ['POST', '/v1/metaserver/abc/more', 'abc'],
    ['POST', '/v1/metaserver/', ''],
    ['GET', '/v1/metaserver/abc', null],
    ['POST', '/v1/chat/completions', null],
    ['POST', '/v1/metaserverx/abc', null],
  ])('%s %s → %j', (method, url, expected) => {
    expect(metaserverToken({ method, url })).toBe(expected);
  });
});
