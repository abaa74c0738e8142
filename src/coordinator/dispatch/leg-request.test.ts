import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { buildMotorDispatch } from '../../protocol/index.js';
import { StaticInstanceSource } from '../instance-source.js';
import { dispatchFor, type LegRole } from './leg-request.js';
import type { Route } from '../route.js';

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
