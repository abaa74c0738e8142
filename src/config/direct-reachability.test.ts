import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

const errorsOf = (raw: Record<string, unknown>): string[] => {
  try {
    validateCoordinatorConfig(raw);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
};

const trigger = (role: string, url: string) => ({
  id: role,
  url,
  role,
  mode: 'direct',
  dispatchProfile: 'trigger',
});
const sglang = (role: string, url: string) => ({ id: role, url, role, mode: 'direct', engine: 'sglang' });

describe('direct mode: addresses stock engines are handed must be reachable by them', () => {
  it.each([
    {
      name: 'trigger on loopback everywhere is fine',
      config: {
        instances: [trigger('prefill', 'http://127.0.0.1:1'), trigger('decode', 'http://127.0.0.1:2')],
      },
      want: [],
    },
    {
      name: 'trigger with a wildcard listen address and no publicUrl',
      config: {
        server: { host: '0.0.0.0' },
        instances: [trigger('prefill', 'http://10.0.0.1:1'), trigger('decode', 'http://10.0.0.2:2')],
      },
      want: [/^server\.publicUrl: required with direct trigger decodes when server\.host is 0\.0\.0\.0/],
    },
    {
      name: 'trigger: a remote decode cannot call a loopback metaserver',
      config: {
        instances: [trigger('prefill', 'http://10.0.0.1:1'), trigger('decode', 'http://10.0.0.2:2')],
      },
      want: [
        /^server\.publicUrl: decode decode at 10\.0\.0\.2 cannot call the metaserver on loopback 127\.0\.0\.1/,
      ],
    },
    {
      name: 'trigger: publicUrl makes it reachable',
      config: {
        server: { host: '0.0.0.0', publicUrl: 'http://10.0.0.5:8000' },
        instances: [trigger('prefill', 'http://10.0.0.1:1'), trigger('decode', 'http://10.0.0.2:2')],
      },
      want: [],
    },
    {
      name: 'SGLang: a remote decode cannot bootstrap from a loopback prefill',
      config: { instances: [sglang('prefill', 'http://localhost:1'), sglang('decode', 'http://10.0.0.2:2')] },
      want: [
        /^instances \(prefill\)\.url: SGLang prefill at loopback localhost, but decode decode at 10\.0\.0\.2/,
      ],
    },
    {
      name: 'SGLang on loopback everywhere is fine',
      config: {
        instances: [sglang('prefill', 'http://127.0.0.1:1'), sglang('decode', 'http://127.0.0.1:2')],
      },
      want: [],
    },
  ])('$name', ({ config, want }) => {
    const errors = errorsOf(config);
    expect(errors).toHaveLength(want.length);
    want.forEach((re, i) => expect(errors[i]).toMatch(re));
  });
});
