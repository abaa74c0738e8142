import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  dispatchPlansFromCapabilities,
  dispatchPlanUnion,
  hasCompatibleDispatchPair,
  sharedDispatchPlans,
  type DispatchCapable,
} from './capabilities.js';

const H = 'prefill_handoff_decode';
const C = 'concurrent_engine_sync';

describe('dispatchPlansFromCapabilities (conformance 1)', () => {
  it.each<[string, unknown, string[]]>([
    ['null', null, []],
    ['undefined', undefined, []],
    ['bare string', H, [H]],
    ['bare non-plan string', 'handoff', []],
    ['list', [H, C], [H, C]],
    ['non-plan strings ignored', ['x', C, 'PREFILL_HANDOFF_DECODE', ''], [C]],
    ['non-strings ignored', [1, null, { plan: H }, [H]], []],
    ['duplicates collapse', [C, C], [C]],
    ['Set', new Set([H]), [H]],
    ['number', 42, []],
    ['object', { 0: H }, []],
    ['bytes', new Uint8Array([1, 2]), []],
  ])('%s', (_name, values, expected) => {
    expect([...dispatchPlansFromCapabilities(values)].sort()).toEqual([...expected].sort());
  });
});

describe('shared plans and unions', () => {
  it.each<[DispatchCapable, DispatchCapable, string[]]>([
    [{ dispatch_capabilities: [H, C] }, { dispatch_capabilities: [C] }, [C]],
    [{ dispatch_capabilities: H }, { dispatch_capabilities: [C] }, []],
    [{}, { dispatch_capabilities: [C] }, []],
  ])('shared(%o, %o)', (p, d, expected) => expect([...sharedDispatchPlans(p, d)]).toEqual(expected));

  it('union parses every instance', () => {
    expect(
      [...dispatchPlanUnion([{ dispatch_capabilities: H }, { dispatch_capabilities: [C, 'x'] }, {}])].sort(),
    ).toEqual([C, H]);
  });
});

describe('hasCompatibleDispatchPair (conformance 2)', () => {
  it.each<[string, DispatchCapable[], DispatchCapable[], boolean]>([
    ['shared plan', [{ dispatch_capabilities: [H] }], [{ dispatch_capabilities: H }], true],
    ['disjoint', [{ dispatch_capabilities: [H] }], [{ dispatch_capabilities: [C] }], false],
    ['no prefill', [], [{ dispatch_capabilities: [C] }], false],
    ['no decode', [{ dispatch_capabilities: [C] }], [], false],
    [
      'match on later instances',
      [{}, { dispatch_capabilities: [C] }],
      [{ dispatch_capabilities: [H] }, { dispatch_capabilities: [C, H] }],
      true,
    ],
  ])('%s', (_name, p, d, expected) => expect(hasCompatibleDispatchPair(p, d)).toBe(expected));

  const capability = fc.oneof(fc.constantFrom(H, C, 'x', 'handoff', ''), fc.integer());
  const instance = fc.record({
    dispatch_capabilities: fc.oneof(
      fc.constant(null),
      fc.constantFrom(H, C, 'junk'),
      fc.array(capability, { maxLength: 4 }),
    ),
  });

  it('equals the O(P·D) definition on random fleets', () => {
    fc.assert(
      fc.property(
        fc.array(instance, { maxLength: 12 }),
        fc.array(instance, { maxLength: 12 }),
        (prefill, decode) => {
          const naive = prefill.some((p) => decode.some((d) => sharedDispatchPlans(p, d).size > 0));
          expect(hasCompatibleDispatchPair(prefill, decode)).toBe(naive);
        },
      ),
      { numRuns: 2000, seed: 20261202 },
    );
  });

  it('handles 200k instances per side (one pass each, no pair enumeration)', () => {
    const prefill = Array.from({ length: 200_000 }, () => ({ dispatch_capabilities: [H] }));
    const decode = Array.from({ length: 200_000 }, (_, i) => ({
      dispatch_capabilities: i === 199_999 ? [H] : [C],
    }));
    expect(hasCompatibleDispatchPair(prefill, decode)).toBe(true);
  });
});
