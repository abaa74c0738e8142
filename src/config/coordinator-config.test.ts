import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  configFromEnv,
  configFromFlags,
  validateCoordinatorConfig,
} from './coordinator-config.js';
import { mergeDeep } from './merge-deep.js';

const errorsOf = (raw: unknown): string[] => {
  try {
    validateCoordinatorConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  return [];
};

describe('coordinator config validation', () => {
  it.each([
    [
      {
        instances: [
          { url: 'http://a:1', role: 'union' },
          { url: 3, role: 'prefill' },
        ],
      },
      'instances[1].url: expected string, received number',
    ],
    [
      { instances: [{ url: 'http://a:1', role: 'worker' }] },
      'instances[0].role: "worker" is not one of prefill, decode, union',
    ],
    [{ server: { port: 'x' } }, 'server.port: expected number, received string'],
    [{ retry: { maxAttempts: 0 } }, 'retry.maxAttempts: Too small: expected number to be >=1'],
    [{ timeouts: { idleMs: -1 } }, 'timeouts.idleMs: Too small: expected number to be >=0'],
    [{ bogus: 1 }, "(root): unknown key(s) 'bogus'"],
    // the bad value echoed with the allowed set, and the nearest valid key or value suggested
    [
      { instances: [{ url: 'http://a:1', role: 'prefil' }] },
      `instances[0].role: "prefil" is not one of prefill, decode, union; did you mean 'prefill'?`,
    ],
    [{ instance: [] }, "(root): unknown key(s) 'instance' (did you mean 'instances'?)"],
    [{ observability: { requireApiKey: true } }, 'observability.requireApiKey: needs server.apiKeys'],
    [
      { instances: [{ url: 'http://a:1', role: 'prefill', dispatchProfile: 'nope' }] },
      'instances[0].dispatchProfile: Unsupported dispatch_profile',
    ],
    [
      {
        instances: [
          { url: 'http://a:1', role: 'union', id: 'x' },
          { url: 'http://b:1', role: 'union', id: 'x' },
        ],
      },
      "instances[1].id: duplicate id 'x'",
    ],
    [
      { dispatch: { prefillFailurePolicy: 'ignore' } },
      'dispatch.prefillFailurePolicy: "ignore" is not one of error, retry, fallback-decode-only',
    ],
  ])('%j → %s', (raw, expected) => {
    expect(errorsOf(raw).join('\n')).toContain(expected);
  });

  it('fills defaults', () => {
    const c = validateCoordinatorConfig({});
    expect(c.server).toMatchObject({ host: '127.0.0.1', port: 8000, apiKeys: [] });
    expect(c.retry.maxAttempts).toBe(3);
    expect(c.dispatch).toMatchObject({ fallbackToSingle: false, prefillFailurePolicy: 'retry' });
    expect(c.scheduling.library.prefill.scorers.map((s) => s.type)).toEqual(['prefix-affinity']);
  });

  it.each([
    [{ dispatchProfile: 'handoff' }, 'handoff', ['prefill_handoff_decode']],
    [{ dispatchProfile: 'concurrent_engine_sync' }, 'trigger', ['concurrent_engine_sync']],
    [{ kvTransferConfig: { kv_connector: 'NixlConnector' } }, 'handoff', ['prefill_handoff_decode']],
    [
      { kvTransferConfig: { kv_connector: 'MooncakeLayerwiseConnector' } },
      'trigger',
      ['concurrent_engine_sync'],
    ],
    [{ kvTransferConfig: { kv_connector: 'SomethingElse' } }, 'unknown', []],
    [{ engine: 'sglang' }, 'bootstrap', ['concurrent_engine_sync']],
    [{ dispatchCapabilities: ['concurrent_engine_sync', 'junk'] }, 'trigger', ['concurrent_engine_sync']],
    [
      { engine: 'sglang', dispatchCapabilities: ['concurrent_engine_sync'] },
      'bootstrap',
      ['concurrent_engine_sync'],
    ],
    [{}, 'unknown', []],
  ])('instance %j → profile %s, capabilities %j', (extra, profile, caps) => {
    const c = validateCoordinatorConfig({ instances: [{ url: 'http://a:1', role: 'prefill', ...extra }] });
    expect(c.instances[0]).toMatchObject({ id: 'prefill-0', index: 0, profile, dispatchCapabilities: caps });
  });

  it('layers env and flags over the file', () => {
    const file = { server: { port: 1, host: 'h' }, retry: { maxAttempts: 2 } };
    const env = configFromEnv({ MOTOR_PORT: '2', MOTOR_API_KEYS: 'a, b' });
    const flags = configFromFlags({
      port: '3',
      set: ['retry.maxAttempts=5', 'instances[0].url=http://x:1', 'instances[0].role=union'],
    });
    const c = validateCoordinatorConfig(mergeDeep(mergeDeep(file, env), flags));
    expect(c.server).toMatchObject({ port: 3, host: 'h', apiKeys: ['a', 'b'] });
    expect(c.retry.maxAttempts).toBe(5);
    expect(c.instances[0]!.url).toBe('http://x:1');
  });
});

describe('coordinator config: every issue at once (issue 18 item 6)', () => {
  const plugin = (type: string) => ({ scheduling: { decode: { picker: { type } } } });
  it.each([
    [
      'a schema error does not hide the scheduling plugin types',
      { server: { port: 'x' }, ...plugin('nope') },
      ['server.port: expected number', "scheduling.decode.picker.type: unknown picker 'nope'"],
    ],
    [
      'a bad instance does not hide a duplicate id or a bad profile among the good ones',
      {
        instances: [
          { url: 'http://a:1', role: 'union', id: 'x' },
          { url: 3, role: 'prefill' },
          { url: 'http://b:1', role: 'union', id: 'x', dispatchProfile: 'nope' },
        ],
      },
      [
        'instances[1].url: expected string',
        "instances[2].id: duplicate id 'x'",
        'instances[2].dispatchProfile: Unsupported dispatch_profile',
      ],
    ],
    [
      'an unknown top-level key does not hide the cross-section checks',
      { bogus: 1, observability: { requireApiKey: true }, registry: { store: 'etcd' } },
      [
        "(root): unknown key(s) 'bogus'",
        'observability.requireApiKey: needs server.apiKeys',
        'registry.endpoints: store etcd needs at least one endpoint',
      ],
    ],
    [
      'a bad scheduling policy does not hide the scrape settings nor a plugin type',
      {
        scheduling: {
          policy: 'fastest',
          engineMetrics: { scrape: 'sometimes' },
          prefill: { scorers: [{ type: 'least-load', weight: 'x' }, { type: 'fastest' }] },
        },
      },
      [
        'scheduling.policy: expected one of',
        'scheduling.engineMetrics.scrape',
        'scheduling.prefill.scorers[0].weight',
        "scheduling.prefill.scorers[1].type: unknown scorer 'fastest'",
      ],
    ],
    [
      'a bad dispatch section does not hide a scheduling plugin type',
      { dispatch: { prefillFailurePolicy: 'ignore' }, ...plugin('nope') },
      [
        'dispatch.prefillFailurePolicy: "ignore" is not one of error, retry, fallback-decode-only',
        "scheduling.decode.picker.type: unknown picker 'nope'",
      ],
    ],
  ])('%s', (_what, raw, expected) => {
    const text = errorsOf(raw).join('\n');
    for (const line of expected) expect(text).toContain(line);
  });

  it.each([
    [{ kv_connector: 'NixlConnector', kv_role: 'kv_both' }, []],
    [
      { kv_conector: 'NixlConnector', kv_role: 'kv_both', kv_load_failure_policy: 'fail' },
      ['instances[0].kvTransferConfig.kv_conector: not a vLLM KVTransferConfig field (vLLM ignores it)'],
    ],
  ])('kvTransferConfig %j warns %j', (kvTransferConfig, warnings) => {
    const c = validateCoordinatorConfig({
      instances: [{ url: 'http://a:1', role: 'prefill', kvTransferConfig }],
    });
    expect(c.warnings).toEqual(warnings);
  });
});
