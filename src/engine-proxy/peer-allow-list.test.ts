import { describe, expect, it } from 'vitest';
import { PeerAllowList } from './peer-allow-list.js';

describe('PeerAllowList', () => {
  const list = new PeerAllowList(['http://10.0.0.1:8000', 'http://127.0.0.1:*', 'https://[::1]:9000/']);

  it.each([
    ['http://10.0.0.1:8000', 'http://10.0.0.1:8000'],
    ['http://10.0.0.1:8000/v1/dispatch/stop', 'http://10.0.0.1:8000'],
    ['http://127.0.0.1:41234', 'http://127.0.0.1:41234'],
    ['https://[::1]:9000', 'https://[::1]:9000'],
    ['http://10.0.0.1:8001', null],
    ['https://10.0.0.1:8000', null],
    ['http://169.254.169.254/latest/meta-data', null],
    ['http://user:pw@10.0.0.1:8000', null],
    ['file:///etc/passwd', null],
    ['not a url', null],
  ])('%s → %s', (url, expected) => {
    expect(list.check(url)).toBe(expected);
  });

  it('an empty list allows nothing', () => {
    expect(new PeerAllowList([]).check('http://127.0.0.1:1')).toBeNull();
  });

  it.each(['10.0.0.1:8000', 'ftp://x:1', 'http://x:1/path'])('rejects the malformed entry %s', (entry) => {
    expect(() => new PeerAllowList([entry])).toThrow(/--peer-allow/);
  });
});
