import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { MotorError } from '../../common/motor-error.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { HealthProber, MemoryRegistry, type InstanceRegistration } from '../../registry/index.js';
import { fleetStatus } from './fleet-status.js';
import type { Instance } from './instance-source.js';
import { RegistryInstanceSource } from './registry-instance-source.js';
import { SchedulingAdapter } from '../scheduling-bridge/scheduling-adapter.js';
import { Upstreams } from './upstream.js';

const inst = (id: string, role: Instance['role']) => ({ id, role }) as Instance;

describe('fleetStatus', () => {
  it.each([
    ['empty fleet', [], [], {}, [], 'no instance is registered', 0],
    [
      'all routable',
      [inst('p', 'prefill'), inst('d', 'decode')],
      ['p', 'd'],
      {},
      [],
      '1 prefill instance registered, all routable; 1 decode instance registered, all routable',
      0,
    ],
    [
      'decodes held out by a breaker and a pause',
      [inst('p', 'prefill'), inst('d1', 'decode'), inst('d2', 'decode')],
      ['p', 'd1'],
      { d2: 'paused' },
      ['d1'],
      '1 prefill instance registered, all routable; 2 decode instances registered, none routable: 1 circuit open, 1 paused',
      2,
    ],
    [
      'a restart: nothing probed yet',
      [inst('u1', 'union'), inst('u2', 'union'), inst('u3', 'union')],
      ['u3'],
      { u1: 'not health-checked yet', u2: 'not health-checked yet' },
      [],
      '3 union instances registered, 1 routable: 2 not health-checked yet',
      2,
    ],
  ] as const)('%s', (_name, registered, routable, why, open, text, heldOut) => {
    const status = fleetStatus({
      registered,
      routable: new Set(routable),
      whyNotRoutable: (i) => (why as Record<string, string>)[i.id] ?? 'not routable',
      circuitOpen: (id) => (open as readonly string[]).includes(id),
    });
    expect(status).toEqual({ text, heldOut, registered: registered.length });
  });
});

/** The coordinator's real wiring: registry → health → source → scheduling adapter. */
function fleet(probe?: () => Promise<void>) {
  const config = validateCoordinatorConfig({
    instances: [],
    scheduling: { seed: 1, circuitBreaker: { failureThreshold: 1 } },
  });
  const registry = new MemoryRegistry();
  const health = new HealthProber(registry, probe ? { intervalMs: 60_000, probe } : { intervalMs: 0 });
  const source = new RegistryInstanceSource({ registry, health });
  health.start();
  const upstreams = new Upstreams({ connectionsPerInstance: 1, keepAliveMs: 1000, connectMs: 1000 });
  const log = createLogger('test', 'silent');
  const adapter = new SchedulingAdapter(config.scheduling, { source, upstreams, log });
  const request = adapter.requestFor(
    {
      kind: 'chat',
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      model: 'm',
      stream: false,
      wantsTokenIds: false,
    },
    {},
  );
  const failure = (): MotorError => {
    try {
      adapter.select(source.routable(), request, new Set());
    } catch (err) {
      return err as MotorError;
    }
    throw new Error('a route was found');
  };
  return { registry, adapter, source, request, failure, close: () => health.stop() };
}

const reg = (id: string, role: 'prefill' | 'decode', models = ['m']): InstanceRegistration => ({
  id,
  role,
  url: `http://127.0.0.1:${role === 'prefill' ? 9001 : 9002}/${id}`,
  dispatch_profile: 'handoff',
  models,
});

describe('no-route errors say what is true of the fleet (issue 15 finding 10)', () => {
  let close: (() => unknown) | undefined;
  afterEach(() => close?.());

  it('registered decodes, none routable: counts them and names why, not "no decode instance is registered"', async () => {
    const f = fleet();
    close = f.close;
    for (const r of [reg('p', 'prefill'), reg('d1', 'decode'), reg('d2', 'decode')])
      await f.registry.register(r);
    await f.registry.pause('d2');
    const d1 = f.source.get('d1')!;
    f.adapter
      .beginLeg(d1, 'decode', f.request, 0)
      .end(new MotorError('engine_error', 'boom', { instanceId: 'd1' }));
    const err = f.failure();
    expect(err).toMatchObject({ code: 'no_route', status: 503 });
    expect(err.message).toBe(
      "no route for model 'm': 1 prefill instance registered, all routable; " +
        '2 decode instances registered, none routable: 1 circuit open, 1 paused',
    );
  });

  it('during a restart (registered, not probed yet) a known model is a retryable 503, not a 404', async () => {
    const f = fleet(() => new Promise<void>(() => {})); // the first probes have not answered
    close = f.close;
    for (const r of [reg('p', 'prefill'), reg('d', 'decode')]) await f.registry.register(r);
    const err = f.failure();
    expect(err).toMatchObject({ code: 'no_route', status: 503, retryable: true });
    expect(err.message).toMatch(/1 decode instance registered, none routable: 1 not health-checked yet$/);
  });

  it('an empty fleet is a 503 too; a model no registered instance serves stays a 404', async () => {
    const f = fleet();
    close = f.close;
    expect(f.failure()).toMatchObject({
      code: 'no_route',
      status: 503,
      message: /no instance is registered/,
    });
    for (const r of [reg('p', 'prefill', ['other']), reg('d', 'decode', ['other'])])
      await f.registry.register(r);
    expect(f.failure()).toMatchObject({ code: 'model_not_found', status: 404 });
  });
});
