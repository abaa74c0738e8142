import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../../test/fixtures/engines/load.js';
import { validateCoordinatorConfig, type ResolvedInstance } from '../../config/coordinator-config.js';
import { parseSglangServerInfo } from '../../engine-adapters/sglang-server-info.js';
import {
  parseModelList,
  parseProxyInfo,
  pendingOutcome,
  reconcile,
  type DiscoveryOutcome,
  type DiscoveryProbe,
  type ProxyInfo,
} from './discovery-reconcile.js';

const instance = (extra: Record<string, unknown>): ResolvedInstance =>
  validateCoordinatorConfig({ instances: [{ url: 'http://p:1', role: 'prefill', ...extra }] }).instances[0]!;

/** A `/v1/motor/info` body as src/engine-proxy/health-info.ts `proxyInfo` writes it. */
const info = (over: Partial<Record<string, unknown>> = {}): ProxyInfo =>
  parseProxyInfo({
    object: 'motor.engine_proxy_info',
    schema_version: '1',
    engine: 'vllm',
    role: 'prefill',
    dispatch_profile: 'handoff',
    dispatch_capabilities: ['prefill_handoff_decode'],
    accepts_roles: ['prefill', 'single'],
    bootstrap: null,
    ...over,
  })!;

const proxy = (i: ProxyInfo | null, error: string | null = null): DiscoveryProbe => ({
  kind: 'proxy',
  info: i,
  error,
  models: ['m'],
});
const sglang = (body: Record<string, unknown> | null): DiscoveryProbe => ({
  kind: 'sglang',
  info: body === null ? null : parseSglangServerInfo(body),
  error: body === null ? 'GET /get_server_info: HTTP 404' : null,
  models: null,
});
const SERVER_INFO = fixtureBody('sglang/server/server-info.json');

describe('reconcile: discovered facts against the config', () => {
  it.each<[string, ResolvedInstance, DiscoveryProbe, Partial<DiscoveryOutcome>]>([
    [
      'bare {url, role} proxy: engine, capabilities and profile come from the proxy',
      instance({}),
      proxy(
        info({
          engine: 'sglang',
          dispatch_profile: 'bootstrap',
          dispatch_capabilities: ['concurrent_engine_sync'],
        }),
      ),
      {
        engine: 'sglang',
        dispatchCapabilities: ['concurrent_engine_sync'],
        profile: 'bootstrap',
        blocked: null,
        notes: [],
      },
    ],
    [
      'a profile the proxy names freely (a plan list only): derived from the plans',
      instance({}),
      proxy(info({ dispatch_profile: 'custom', dispatch_capabilities: ['concurrent_engine_sync'] })),
      { profile: 'trigger', blocked: null },
    ],
    [
      'role mismatch the proxy refuses: held out, with the reason',
      instance({}),
      proxy(info({ role: 'decode', accepts_roles: ['decode'] })),
      { blocked: 'role: config says prefill, the proxy serves decode and refuses prefill legs' },
    ],
    [
      'union config over a prefill proxy (it accepts single legs): a note only',
      instance({ role: 'union' }),
      proxy(info({ role: 'prefill' })),
      { blocked: null, notes: ['role: config says union, the proxy serves prefill'] },
    ],
    [
      'configured engine disagrees: a note, the config wins',
      instance({ engine: 'vllm', dispatchProfile: 'handoff' }),
      proxy(info({ engine: 'sglang' })),
      { engine: 'vllm', blocked: null, notes: ['engine: config says vllm, the proxy reports sglang'] },
    ],
    [
      'configured capabilities disagree: a note, nothing overridden',
      instance({ dispatchProfile: 'trigger' }),
      proxy(info()),
      {
        dispatchCapabilities: undefined,
        notes: [
          'dispatch capabilities: config says concurrent_engine_sync, the proxy reports prefill_handoff_decode (config wins)',
        ],
      },
    ],
    [
      'proxy advertises nothing for a P/D role: held out',
      instance({}),
      proxy(info({ dispatch_profile: 'unknown', dispatch_capabilities: [] })),
      { blocked: 'the proxy advertises no dispatch capability (unknown profile)' },
    ],
    [
      'info unreadable, capabilities not configured: held out',
      instance({}),
      proxy(null, 'GET /v1/motor/info: HTTP 404'),
      { blocked: 'capabilities unknown: GET http://p:1/v1/motor/info failed: GET /v1/motor/info: HTTP 404' },
    ],
    [
      'info unreadable, capabilities configured: a note',
      instance({ dispatchProfile: 'handoff' }),
      proxy(null, 'timed out'),
      { blocked: null, notes: ['GET http://p:1/v1/motor/info failed: timed out'] },
    ],
    [
      'direct SGLang: the reported bootstrap port wins over the configured one',
      instance({ mode: 'direct', engine: 'sglang', bootstrapPort: 7000 }),
      sglang({ ...SERVER_INFO, disaggregation_bootstrap_port: 9100 }),
      { bootstrapPort: 9100, blocked: null, notes: [] },
    ],
    [
      'direct SGLang without server info: configured port',
      instance({ mode: 'direct', engine: 'sglang', bootstrapPort: 7000 }),
      sglang(null),
      { bootstrapPort: 7000, blocked: null, notes: ['server info: GET /get_server_info: HTTP 404'] },
    ],
    [
      "direct SGLang, nothing known: SGLang's default 8998, not the HTTP port",
      instance({ mode: 'direct', engine: 'sglang' }),
      sglang(null),
      { bootstrapPort: 8998 },
    ],
    [
      'direct SGLang configured decode, engine runs prefill: held out',
      instance({ mode: 'direct', engine: 'sglang', role: 'decode' }),
      sglang(SERVER_INFO),
      { blocked: 'role: config says decode, SGLang runs disaggregation_mode prefill' },
    ],
    [
      'direct vLLM: only the models',
      instance({ mode: 'direct', dispatchProfile: 'handoff' }),
      { kind: 'engine', models: ['a', 'b'] },
      { reportedModels: ['a', 'b'], blocked: null, notes: [], engine: undefined, bootstrapPort: undefined },
    ],
  ])('%s', (_name, configured, probe, expected) => {
    const got = reconcile(configured, probe) as unknown as Record<string, unknown>;
    expect(Object.fromEntries(Object.keys(expected).map((k) => [k, got[k]]))).toEqual(expected);
  });

  it.each<[string, ResolvedInstance, string | null]>([
    [
      'proxy without configured capabilities waits',
      instance({}),
      'capabilities not discovered yet (GET http://p:1/v1/motor/info)',
    ],
    ['proxy with a configured profile does not', instance({ dispatchProfile: 'handoff' }), null],
    ['proxy with engine sglang does not (bootstrap)', instance({ engine: 'sglang' }), null],
    ['direct vLLM does not (nothing to ask)', instance({ mode: 'direct' }), null],
  ])('before discovery: %s', (_name, configured, blocked) => {
    expect(pendingOutcome(configured).blocked).toBe(blocked);
  });

  it('engine unset: vllm in direct mode, discoverable in proxy mode', () => {
    expect(instance({ mode: 'direct' })).toMatchObject({ engine: 'vllm', configured: { engine: false } });
    expect(instance({ engine: 'sglang' }).configured).toEqual({ engine: true, capabilities: true });
  });

  it.each<[unknown, string[] | null]>([
    [{ object: 'list', data: [{ id: 'a', object: 'model' }, { id: '' }, { id: 'b' }] }, ['a', 'b']],
    [{ object: 'list', data: [] }, []],
    [{ error: 'x' }, null],
    [null, null],
  ])('parseModelList(%j)', (body, ids) => {
    expect(parseModelList(body)).toEqual(ids);
  });

  it('parseProxyInfo: only a Motor proxy info body', () => {
    expect(parseProxyInfo({ engine: 'vllm' })).toBeNull();
    expect(info({ engine: 'tgi', dispatch_capabilities: ['nope', 'prefill_handoff_decode'] })).toMatchObject({
      engine: null,
      dispatchCapabilities: ['prefill_handoff_decode'],
    });
  });
});
