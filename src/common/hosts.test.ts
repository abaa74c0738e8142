import { describe, expect, it } from 'vitest';
import { isLoopbackHost, isWildcardHost } from './hosts.js';

describe('host kinds', () => {
  it.each([
    ['127.0.0.1', true, false],
    ['127.1.2.3', true, false],
    ['localhost', true, false],
    ['[::1]', true, false],
    ['0.0.0.0', false, true],
    ['::', false, true],
    ['[::]', false, true],
    ['10.0.0.5', false, false],
    ['decode.example', false, false],
  ])('%s: loopback %s, wildcard %s', (host, loopback, wildcard) => {
    expect(isLoopbackHost(host)).toBe(loopback);
    expect(isWildcardHost(host)).toBe(wildcard);
  });
});
