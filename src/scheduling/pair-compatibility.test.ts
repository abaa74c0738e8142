import { describe, expect, it } from 'vitest';
import { canPair, pairableDecodes } from './pair-compatibility.js';
import { Scheduler } from './scheduler.js';
import { instance, request } from './testing.js';
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

  it('pairableDecodes answers what canPair over every decode would', () => {
    const facts = [undefined, 'a', 'b'];
    const all = facts.flatMap((engine) => facts.map((kvConnector) => ({ engine, kvConnector })));
    // every subset of the 9 fact combinations as the decodes, every combination as the prefill
    for (let mask = 0; mask < 1 << all.length; mask += 1) {
      const decodes = all.filter((_, i) => mask & (1 << i));
      const hasDecode = pairableDecodes(decodes);
      for (const prefill of all)
        expect(hasDecode(prefill)).toBe(decodes.some((decode) => canPair(prefill, decode)));
    }
  });
});
