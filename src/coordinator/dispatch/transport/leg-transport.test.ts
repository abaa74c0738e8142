import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../common/logger.js';
import { PEER_SECRET_HEADER, PeerSecrets } from '../../../common/peer-secrets.js';
import { validateCoordinatorConfig } from '../../../config/coordinator-config.js';
import { noopRequestObserver } from '../../../observability/dispatch-observer.js';
import { buildPrefillResult, type PrefillResult } from '../../../protocol/index.js';
import { StaticInstanceSource, type Instance } from '../../fleet/instance-source.js';
import { MotorError } from '../../../common/motor-error.js';
import type { PdFlow, PdRoute } from '../../scheduling-bridge/route.js';
import { dispatchFor } from './leg-request.js';
import { LegTransports, type StopOrder } from './leg-transport.js';

const [proxyP, proxyD, vllmP, vllmD, sglangP, sglangD] = new StaticInstanceSource(
  validateCoordinatorConfig({
    instances: [
      { id: 'pP', url: 'http://pp:1', role: 'prefill', dispatchProfile: 'handoff' },
      { id: 'pD', url: 'http://pd:1', role: 'decode', dispatchProfile: 'handoff' },
      { id: 'vP', url: 'http://vp:1', role: 'prefill', dispatchProfile: 'handoff', mode: 'direct' },
      { id: 'vD', url: 'http://vd:1', role: 'decode', dispatchProfile: 'handoff', mode: 'direct' },
      { id: 'sP', url: 'http://sp:1', role: 'prefill', engine: 'sglang', mode: 'direct' },
      { id: 'sD', url: 'http://sd:1', role: 'decode', engine: 'sglang', mode: 'direct' },
    ],
  }).instances,
).routable() as Instance[];

const ids = { rootRequestId: 'req-1', engineRequestId: 'req-1#a1', pairId: 'pair-1', attemptSeq: 1 };
const posted: Array<{ instance: string; path: string; body: string }> = [];
const transports = new LegTransports({
  upstreams: {
    postJson: async (instance, path, body) => {
      posted.push({ instance: (instance as Instance).id, path, body });
      return { status: 200, text: '{"state":"stopped"}' };
    },
  },
  stopMs: 100,
  log: createLogger('test', 'silent'),
  publicUrl: () => 'http://coordinator:8000',
});

const result = (over: Partial<PrefillResult> = {}) =>
  buildPrefillResult({
    root_request_id: 'req-1',
    engine_request_id: 'req-1#a1',
    pair_id: 'pair-1',
    attempt_seq: 1,
    status: 'completed',
    handoff_mode: 'handoff',
    payload: { kv: 1 },
    ...over,
  });

describe('LegTransport.prefillResult', () => {
  it.each<[string, Instance, PdFlow, unknown, RegExp | Record<string, unknown>]>([
    ['proxy: a bare PrefillResult', proxyP!, 'handoff', result(), { payload: { kv: 1 } }],
    [
      'proxy: one carried in a response object',
      proxyP!,
      'handoff',
      { id: 'x', _motor_prefill_result: result() },
      { payload: { kv: 1 } },
    ],
    [
      'proxy: another attempt’s result',
      proxyP!,
      'handoff',
      result({ attempt_seq: 2 }),
      /belongs to another attempt/,
    ],
    [
      'proxy: handoff needs a completed or skipped handoff',
      proxyP!,
      'handoff',
      result({ status: 'prepared' }),
      /expected a completed or skipped handoff result, got prepared\/handoff/,
    ],
    [
      'proxy: trigger accepts prepared',
      proxyP!,
      'trigger',
      result({ status: 'prepared', handoff_mode: 'trigger' }),
      { status: 'prepared' },
    ],
    ['proxy: not a PrefillResult', proxyP!, 'handoff', { id: 'x' }, /invalid PrefillResult/],
    [
      'direct vLLM handoff: kv_transfer_params become the payload',
      vllmP!,
      'handoff',
      { kv_transfer_params: { a: 1 }, usage: { prompt_tokens: 3 } },
      { payload: { a: 1 }, usage: { prompt_tokens: 3 }, handoff_mode: 'handoff' },
    ],
    [
      'direct vLLM handoff without kv_transfer_params: skipped (a plain decode follows)',
      vllmP!,
      'handoff',
      { id: 'x' },
      { status: 'skipped', payload: {}, expires_at_ms: null },
    ],
    [
      'direct SGLang bootstrap: usage only',
      sglangP!,
      'bootstrap',
      { usage: { prompt_tokens: 3 } },
      { payload: {}, handoff_mode: 'bootstrap' },
    ],
  ])('%s', (_name, instance, flow, json, expected) => {
    const r = transports.for(instance).prefillResult(instance, json, ids, flow);
    if (expected instanceof RegExp) {
      expect(r).toBeInstanceOf(MotorError);
      expect((r as MotorError).code).toBe('protocol_error');
      expect((r as MotorError).message).toMatch(expected);
      expect((r as MotorError).instanceId).toBe(instance.id);
    } else {
      expect(r).toMatchObject({ root_request_id: 'req-1', pair_id: 'pair-1', ...expected });
    }
  });
});

describe('DirectTransport.prefillResult: its literal is what the schema builds', () => {
  it.each<[string, Instance, PdFlow, unknown]>([
    ['vLLM handoff', vllmP!, 'handoff', { kv_transfer_params: { a: 1 }, usage: { prompt_tokens: 3 } }],
    ['vLLM handoff, lease connector', vllmP!, 'handoff', { kv_transfer_params: { transfer_mode: 'pull' } }],
    ['vLLM handoff skipped', vllmP!, 'handoff', { kv_transfer_params: null }],
    ['vLLM trigger', vllmP!, 'trigger', { kv_transfer_params: { b: 2 } }],
    ['SGLang bootstrap', sglangP!, 'bootstrap', { usage: { prompt_tokens: 3 } }],
  ])('%s', (_name, instance, flow, json) => {
    const r = transports.for(instance).prefillResult(instance, json, ids, flow) as PrefillResult;
    expect(r).not.toBeInstanceOf(MotorError);
    const built = buildPrefillResult(r);
    expect(r).toStrictEqual(built);
    expect(Object.keys(r)).toEqual(Object.keys(built));
  });
});

describe('LegTransport.request', () => {
  const route = (prefill: Instance, decode: Instance): PdRoute => ({
    kind: 'pd',
    plan: 'prefill_handoff_decode',
    flow: 'handoff',
    prefill,
    decode,
  });
  it.each<[string, Instance, Instance, string[], string[]]>([
    [
      'proxy: client body + envelope + prefill result',
      proxyD!,
      proxyP!,
      ['_motor_dispatch', '_motor_prefill_result'],
      [],
    ],
    [
      'direct vLLM: engine-native, no envelope',
      vllmD!,
      vllmP!,
      ['kv_transfer_params'],
      ['_motor_dispatch', '_motor_prefill_result'],
    ],
  ])('%s', (_name, decode, prefill, present, absent) => {
    const r = route(prefill, decode);
    const req = transports.for(decode).request(decode, {
      body: { model: 'm', messages: [] },
      dispatch: dispatchFor(ids, 'decode', r),
      prefillResult: result(),
    });
    const body = JSON.parse(req.body.toString()) as Record<string, unknown>;
    expect(req.headers['x-request-id']).toBe('req-1#a1');
    expect(body.model).toBe('m');
    for (const key of present) expect(body).toHaveProperty(key);
    for (const key of absent) expect(body).not.toHaveProperty(key);
  });

  it.each<[string, Instance, string | null]>([
    ['proxy: the engine proxy serves it', proxyP!, null],
    ['direct: this coordinator serves it', vllmP!, 'http://coordinator:8000/v1/metaserver/t0k3n'],
  ])('trigger metaserver, %s', (_name, prefill, url) => {
    expect(transports.for(prefill).triggerMetaserverUrl('t0k3n')).toBe(url);
  });
});

describe('LegTransport.stop', () => {
  it.each<[string, Instance, boolean, Array<{ instance: string; path: string }>, string[]]>([
    [
      'proxy: always POST /v1/dispatch/stop',
      proxyD!,
      false,
      [{ instance: 'pD', path: '/v1/dispatch/stop' }],
      [],
    ],
    ['direct vLLM: the closed connection is the stop', vllmD!, true, [], ['connection_closed']],
    [
      'direct SGLang: plus /abort_request',
      sglangD!,
      true,
      [{ instance: 'sD', path: '/abort_request' }],
      ['connection_closed'],
    ],
    ['direct: no leg opened there, nothing to stop', sglangD!, false, [], []],
  ])('%s', async (_name, instance, opened, calls, results) => {
    posted.length = 0;
    const seen: string[] = [];
    const order: StopOrder = {
      ids,
      reason: 'client_disconnect',
      body: '{"reason":"client_disconnect"}',
      obs: { ...noopRequestObserver, stopResult: (_reason, r) => seen.push(r) },
      opened: () => opened,
    };
    transports.for(instance).stop(instance, order);
    await new Promise((r) => setImmediate(r));
    expect(posted.map(({ instance, path }) => ({ instance, path }))).toEqual(calls);
    expect(seen).toEqual(instance.mode === 'proxy' ? ['stopped'] : results);
  });
});

const SECRET = 'coordinator-peer-secret';
const SECRETS = await PeerSecrets.load({ secrets: [SECRET] });

// Issue 15 finding 3: the coordinator presents the engine-proxy peer secret on every leg and stop.
describe('peer secret', () => {
  const stops: Array<{ instance: string; headers: Record<string, string> | undefined }> = [];
  const withSecret = new LegTransports({
    upstreams: {
      postJson: async (instance, _path, _body, _ms, opts) => {
        stops.push({ instance: (instance as Instance).id, headers: opts?.headers });
        return { status: 200, text: '{"state":"stopped"}' };
      },
    },
    stopMs: 100,
    log: createLogger('test', 'silent'),
    publicUrl: () => 'http://coordinator:8000',
    peerSecrets: SECRETS,
  });
  const route: PdRoute = {
    kind: 'pd',
    plan: 'prefill_handoff_decode',
    flow: 'handoff',
    prefill: vllmP!,
    decode: vllmD!,
  };

  it.each<[string, Instance, string | undefined]>([
    ['proxy legs carry it', proxyD!, SECRET],
    ['direct legs never do (a stock engine is no peer)', vllmD!, undefined],
  ])('%s', (_name, decode, want) => {
    const req = withSecret.for(decode).request(decode, {
      body: { model: 'm' },
      dispatch: dispatchFor(ids, 'decode', route),
      prefillResult: result(),
    });
    expect(req.headers[PEER_SECRET_HEADER]).toBe(want);
  });

  it('a stop to a proxy carries it', async () => {
    const order: StopOrder = {
      ids,
      reason: 'timeout',
      body: '{}',
      obs: noopRequestObserver,
      opened: () => true,
    };
    withSecret.for(proxyD!).stop(proxyD!, order);
    await new Promise((r) => setImmediate(r));
    expect(stops).toEqual([{ instance: 'pD', headers: { [PEER_SECRET_HEADER]: SECRET } }]);
  });
});
