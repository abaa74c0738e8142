import { describe, expect, it } from 'vitest';
import { canPair, pairableDecodes } from './pair-compatibility.js';
import { Scheduler } from './scheduler.js';
import { seededRandom } from './seeded-random.js';
import { instance, request } from './testing/index.js';
import type { SchedulableInstance } from './types.js';

const SYNC = ['concurrent_engine_sync'];
const of = (id: string, role: 'prefill' | 'decode', engine?: string): SchedulableInstance => ({
  ...instance(id, role, SYNC),
  ...(engine ? { engine } : {}),
});

// A vLLM layer-wise prefill and an SGLang decode share the plan name `concurrent_engine_sync`, but not
// a wire flow: such a pair could only fail.
describe('pairs form within one engine kind', () => {
  it.each([
    {
      name: 'vLLM prefill → the vLLM decode',
      instances: [of('pv', 'prefill', 'vllm'), of('ds', 'decode', 'sglang'), of('dv', 'decode', 'vllm')],
      prefill: 'pv',
      decode: 'dv',
    },
    {
      name: 'SGLang prefill → the SGLang decode',
      instances: [of('ps', 'prefill', 'sglang'), of('dv', 'decode', 'vllm'), of('ds', 'decode', 'sglang')],
      prefill: 'ps',
      decode: 'ds',
    },
    {
      name: 'a prefill with no decode of its kind is passed over',
      instances: [of('pv', 'prefill', 'vllm'), of('ps', 'prefill', 'sglang'), of('ds', 'decode', 'sglang')],
      prefill: 'ps',
      decode: 'ds',
    },
    {
      name: 'an instance naming no engine pairs with any',
      instances: [of('p', 'prefill'), of('ds', 'decode', 'sglang')],
      prefill: 'p',
      decode: 'ds',
    },
  ])('$name', ({ instances, prefill, decode }) => {
    for (let seed = 1; seed <= 20; seed += 1) {
      const decision = new Scheduler({ seed }).selectPair(request(), instances);
      expect(decision).toMatchObject({ kind: 'pair', prefill: { id: prefill }, decode: { id: decode } });
    }
  });
});

const HANDOFF = ['prefill_handoff_decode'];
const via = (
  id: string,
  role: 'prefill' | 'decode',
  kvConnector?: string,
  engine = 'vllm',
): SchedulableInstance => ({
  ...instance(id, role, HANDOFF),
  engine,
  ...(kvConnector ? { kvConnector } : {}),
});

// A vLLM NIXL prefill and a vllm-ascend Mooncake decode are both `handoff` and both vLLM, yet the
// decode cannot read the prefill's blocks: the transfer would fail after the prefill ran.
describe('pairs form within one KV connector', () => {
  it.each([
    {
      name: 'NIXL prefill → the NIXL decode, not the Mooncake one',
      instances: [
        via('pn', 'prefill', 'NixlConnector'),
        via('dm', 'decode', 'MooncakeConnectorV1'),
        via('dn', 'decode', 'NixlConnector'),
      ],
      prefill: 'pn',
      decode: 'dn',
    },
    {
      name: 'a prefill with no decode of its connector is passed over',
      instances: [
        via('pn', 'prefill', 'NixlConnector'),
        via('pm', 'prefill', 'MooncakeConnectorV1'),
        via('dm', 'decode', 'MooncakeConnectorV1'),
      ],
      prefill: 'pm',
      decode: 'dm',
    },
    {
      name: 'both facts at once: a decode matching the engine only and one matching the connector only do not add up',
      instances: [
        via('pn', 'prefill', 'NixlConnector'),
        via('pm', 'prefill', 'MooncakeConnectorV1'),
        via('dm', 'decode', 'MooncakeConnectorV1'),
        via('ds', 'decode', undefined, 'sglang'),
      ],
      prefill: 'pm',
      decode: 'dm',
    },
    {
      name: 'a decode naming no connector pairs with any',
      instances: [via('pn', 'prefill', 'NixlConnector'), via('d', 'decode')],
      prefill: 'pn',
      decode: 'd',
    },
    {
      name: 'a prefill naming no connector pairs with any',
      instances: [via('p', 'prefill'), via('dm', 'decode', 'MooncakeConnectorV1')],
      prefill: 'p',
      decode: 'dm',
    },
  ])('$name', ({ instances, prefill, decode }) => {
    for (let seed = 1; seed <= 20; seed += 1) {
      const decision = new Scheduler({ seed }).selectPair(request(), instances);
      expect(decision).toMatchObject({ kind: 'pair', prefill: { id: prefill }, decode: { id: decode } });
    }
  });

  it('no pair shares a connector: no_compatible_pair naming both sides, in explain (/ready) too', () => {
    const fleet = [via('pn', 'prefill', 'NixlConnector'), via('dm', 'decode', 'MooncakeConnectorV1')];
    const scheduler = new Scheduler({ seed: 1 });
    const failure = {
      kind: 'failure',
      code: 'no_compatible_pair',
      message:
        'no prefill/decode pair shares a dispatch plan, engine kind and KV connector ' +
        '(prefill: vllm NixlConnector; decode: vllm MooncakeConnectorV1)',
    };
    expect(scheduler.selectPair(request(), fleet)).toMatchObject(failure);
    expect(scheduler.explain(request(), fleet, { assumeAvailable: true })).toMatchObject({
      kind: 'failure',
      failure: { code: 'no_compatible_pair' },
    });
  });

  it('no pair shares a connector: the union fallback serves', () => {
    const fleet = [
      via('pn', 'prefill', 'NixlConnector'),
      via('dm', 'decode', 'MooncakeConnectorV1'),
      instance('u', 'union', HANDOFF),
    ];
    expect(new Scheduler({ seed: 1 }).selectPair(request(), fleet)).toMatchObject({
      kind: 'single',
      reason: 'union',
      instance: { id: 'u' },
    });
  });

  it('plan and connector are one match: a decode sharing only the plan and one sharing only the connector make no pair', () => {
    const fleet = [
      via('pn', 'prefill', 'NixlConnector'),
      { ...via('dn', 'decode', 'NixlConnector'), dispatch_capabilities: ['concurrent_engine_sync'] },
      via('dm', 'decode', 'MooncakeConnectorV1'),
    ];
    expect(new Scheduler({ seed: 1 }).selectPair(request(), fleet)).toMatchObject({
      kind: 'failure',
      code: 'no_compatible_pair',
    });
  });

  it('pairableDecodes answers what plans + canPair over every decode would', () => {
    const names = [undefined, 'a', 'b'];
    const plans = [['x'], ['y'], ['x', 'y']];
    const all = names.flatMap((engine) =>
      names.flatMap((kvConnector) => plans.map((caps) => ({ engine, kvConnector, caps }))),
    );
    const random = seededRandom(7);
    for (let round = 0; round < 400; round += 1) {
      const decodes = all.filter(() => random() < 0.15);
      const hasDecode = pairableDecodes(decodes, (i) => i.caps);
      for (const prefill of all) {
        const brute = decodes.some(
          (d) => d.caps.some((plan) => prefill.caps.includes(plan)) && canPair(prefill, d),
        );
        expect(hasDecode(prefill)).toBe(brute);
      }
    }
  });
});

// vLLM keeps `NixlConnector = NixlPullConnector` (…/v1/nixl/connector.py): one wire under two names;
// a push decode waits for the prefill's WRITE that a pull prefill never does.
describe('NIXL pull and push', () => {
  it.each([
    ['NixlConnector', 'NixlPullConnector', true],
    ['NixlPullConnector', 'NixlConnector', true],
    ['NixlConnector', 'NixlPushConnector', false],
    ['NixlPushConnector', 'NixlPullConnector', false],
    ['NixlPushConnector', 'NixlPushConnector', true],
  ])('prefill %s, decode %s: pairs %s', (p, d, pairs) => {
    const prefill = via('p', 'prefill', p);
    const decode = via('d', 'decode', d);
    expect(canPair(prefill, decode)).toBe(pairs);
    expect(pairableDecodes([decode], (i) => i.dispatch_capabilities)(prefill)).toBe(pairs);
    // the keyed path (decodes naming different connectors)
    const mixed = [decode, via('m', 'decode', 'MooncakeConnectorV1')];
    expect(pairableDecodes(mixed, (i) => i.dispatch_capabilities)(prefill)).toBe(pairs);
  });
});
