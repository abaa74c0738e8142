import { describe, expect, it } from 'vitest';
import { bootstrapAddressFromUrl, type BootstrapOverride } from './bootstrap-address.js';

describe('bootstrapAddressFromUrl', () => {
  it.each<[string, BootstrapOverride | undefined, string, number]>([
    ['http://10.0.0.1:30000', undefined, '10.0.0.1', 30000],
    ['http://10.0.0.1:30000/', {}, '10.0.0.1', 30000],
    ['http://prefill-0.svc', undefined, 'prefill-0.svc', 80],
    ['https://prefill-0.svc/base', undefined, 'prefill-0.svc', 443],
    ['http://[::1]:8000', undefined, '::1', 8000],
    ['http://[fd00::2]', undefined, 'fd00::2', 80],
    ['http://10.0.0.1:30000', { port: 8998 }, '10.0.0.1', 8998],
    ['http://0.0.0.0:30000', { host: '127.0.0.1' }, '127.0.0.1', 30000],
    ['http://10.0.0.1:30000', { host: null, port: null }, '10.0.0.1', 30000],
    ['http://10.0.0.1', { host: 'engine.local', port: 9000 }, 'engine.local', 9000],
  ])('%s with %j → %s:%i', (url, override, host, port) => {
    expect(bootstrapAddressFromUrl(url, override)).toEqual({ host, port });
    expect(bootstrapAddressFromUrl(new URL(url), override)).toEqual({ host, port });
  });
});
