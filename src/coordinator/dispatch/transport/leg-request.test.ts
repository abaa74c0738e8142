import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../../../config/coordinator-config.js';
import { checkJsonShape } from '../../../common/json-shape.js';
import { jsonSource } from '../../../common/json-splice.js';
import { createLogger } from '../../../common/logger.js';
import { buildMotorDispatch, buildPrefillResult } from '../../../protocol/index.js';
import { StaticInstanceSource, type Instance } from '../../fleet/instance-source.js';
import { dispatchFor, prefillShapedBody, type LegRole } from './leg-request.js';
import { LegTransports } from './leg-transport.js';
import type { Route } from '../../scheduling-bridge/route.js';

const [P, D, U] = new StaticInstanceSource(
  validateCoordinatorConfig({
    instances: [
      { id: 'P', url: 'http://p:1', role: 'prefill', dispatchProfile: 'handoff' },
      { id: 'D', url: 'http://d:2', role: 'decode', dispatchProfile: 'handoff' },
      { id: 'U', url: 'http://u:3', role: 'union' },
    ],
  }).instances,
).routable();

const ids = { rootRequestId: 'req-1', engineRequestId: 'req-1#a2', pairId: 'pair', attemptSeq: 2 };
const pd: Route = { kind: 'pd', plan: 'prefill_handoff_decode', flow: 'handoff', prefill: P!, decode: D! };
const single: Route = { kind: 'single', instance: U!, degraded: false };

describe('dispatchFor', () => {
  it.each<[string, LegRole, Route]>([
    ['prefill leg', 'prefill', pd],
    ['decode leg', 'decode', pd],
    ['single', 'single', single],
  ])('%s: the literal is what the schema builder makes, key order included', (_name, role, route) => {
    const built = dispatchFor(ids, role, route);
    const checked = buildMotorDispatch(built);
    expect(JSON.stringify(built)).toBe(JSON.stringify(checked));
  });
});

describe('leg bodies spliced from the client bytes (issue 19)', () => {
  const [pP, pD, vP, vD, sP, sD] = new StaticInstanceSource(
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
  ).routable();
  const transports = new LegTransports({
    upstreams: { postJson: async () => ({ status: 200, text: '{}' }) },
    stopMs: 100,
    log: createLogger('test', 'silent'),
    publicUrl: () => 'http://coordinator:8000',
  });
  const prompt = `a \\"long\\" prompt ${'x'.repeat(64 * 1024)}`;
  const client =
    `{"model":"m","messages":[{"role":"user","content":"${prompt}"}],"stream":true,` +
    '"stream_options":{"include_usage":true},"min_tokens":2,"max_tokens":16,"seed":12345678901234567890}';
  const bytes = Buffer.from(client);
  const members: number[] = [];
  checkJsonShape(bytes, { maxDepth: 64, maxKeys: 64 }, members);
  const parsed = JSON.parse(client) as Record<string, unknown>;
  const source = jsonSource(bytes, members, parsed);
  const payload = { remote_engine_id: 'e', remote_block_ids: [1, 2] };
  const prefillResult = buildPrefillResult({
    root_request_id: 'req-1',
    engine_request_id: 'req-1#a2',
    pair_id: 'pair',
    attempt_seq: 2,
    status: 'completed',
    handoff_mode: 'handoff',
    payload,
  });

  it.each<[string, Instance, LegRole, 'pd' | 'bootstrap']>([
    ['vLLM handoff prefill', vP!, 'prefill', 'pd'],
    ['vLLM handoff decode', vD!, 'decode', 'pd'],
    ['engine proxy prefill', pP!, 'prefill', 'pd'],
    ['engine proxy decode', pD!, 'decode', 'pd'],
    ['SGLang bootstrap prefill', sP!, 'prefill', 'bootstrap'],
    ['SGLang bootstrap decode', sD!, 'decode', 'bootstrap'],
  ])(
    '%s: parses as the serialised leg; kept members are views of the client bytes',
    (_name, instance, role, kind) => {
      const r: Route =
        kind === 'pd'
          ? { kind: 'pd', plan: 'prefill_handoff_decode', flow: 'handoff', prefill: P!, decode: D! }
          : { kind: 'pd', plan: 'concurrent_engine_sync', flow: 'bootstrap', prefill: sP!, decode: sD! };
      const input = {
        body: role === 'prefill' ? prefillShapedBody(parsed) : parsed,
        dispatch: dispatchFor(ids, role, r),
        prefillResult: role === 'decode' && kind === 'pd' ? prefillResult : null,
        bootstrap: kind === 'bootstrap' ? { host: 'sp', port: 8998 } : null,
      };
      const whole = transports.for(instance).request(instance, input);
      const spliced = transports.for(instance).request(instance, { ...input, source });
      const parts = spliced.body as Buffer[];
      // nothing proportional to the prompt is copied: it goes as a view of the client's bytes
      const copied = parts.filter((part) => part.buffer !== bytes.buffer);
      expect(copied.reduce((n, part) => n + part.length, 0)).toBeLessThan(1024);
      const text = Buffer.concat(parts).toString();
      expect(text).toContain('"seed":12345678901234567890'); // serialising would round it
      const roundSeed = (s: string): unknown => JSON.parse(s.replace(/"seed":\d+/, '"seed":1'));
      expect(roundSeed(text)).toEqual(roundSeed(whole.body.toString()));
      expect(spliced.headers).toEqual(whole.headers);
      if (role === 'prefill') {
        expect(JSON.parse(text)).not.toHaveProperty('stream_options');
        expect(text.match(/"max_tokens"/g)).toHaveLength(1); // no duplicate keys
      }
    },
  );
});
