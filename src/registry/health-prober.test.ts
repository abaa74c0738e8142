import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../common/http.js';
import { ManualClock } from '../common/clock.js';
import { HealthProber, type HealthStatus, type ProbeFunction } from './health-prober.js';
import type { InstanceRecord } from './instance-record.js';
import { MemoryRegistry } from './memory-registry.js';

/** A probe whose outcome per instance the test sets; counts calls and records abort signals. */
function scriptedProbe(): {
  probe: ProbeFunction;
  outcome: Map<string, 'ok' | 'fail' | 'hang'>;
  calls: string[];
  aborted: string[];
} {
  const outcome = new Map<string, 'ok' | 'fail' | 'hang'>();
  const calls: string[] = [];
  const aborted: string[] = [];
  const probe: ProbeFunction = (instance: InstanceRecord, signal) => {
    calls.push(instance.id);
    signal.addEventListener('abort', () => aborted.push(instance.id));
    const o = outcome.get(instance.id) ?? 'ok';
    if (o === 'ok') return Promise.resolve();
    if (o === 'fail') return Promise.reject(new Error('HTTP 503'));
    return new Promise(() => undefined);
  };
  return { probe, outcome, calls, aborted };
}

async function setup(options: { intervalMs?: number } = {}) {
  const timers = new ManualClock();
  const registry = new MemoryRegistry({ timers });
  const scripted = scriptedProbe();
  const prober = new HealthProber(registry, {
    intervalMs: options.intervalMs ?? 1000,
    timeoutMs: 200,
    unhealthyAfter: 3,
    healthyAfter: 2,
    timers,
    probe: scripted.probe,
  });
  const transitions: [string, HealthStatus, HealthStatus][] = [];
  prober.onChange((id, h, prev) => transitions.push([id, prev, h.status]));
  return { timers, registry, prober, transitions, ...scripted };
}

const instance = (id: string) => ({ id, role: 'decode' as const, url: `http://127.0.0.1:1/${id}` });

describe('HealthProber (manual timers)', () => {
  it('a new instance is unknown (not routable) until its first probe, which runs at once', async () => {
    const { timers, registry, prober, calls, transitions } = await setup();
    prober.start();
    await registry.register(instance('d-0'));
    expect(prober.health('d-0')?.status).toBe('unknown');
    expect(prober.routable()).toEqual([]);
    await timers.advanceAsync(0);
    expect(calls).toEqual(['d-0']);
    expect(prober.health('d-0')).toMatchObject({
      status: 'healthy',
      last_error: null,
      last_probe_at_ms: timers.now(),
    });
    expect(prober.routable().map((r) => r.id)).toEqual(['d-0']);
    expect(transitions).toEqual([['d-0', 'unknown', 'healthy']]);
    await timers.advanceAsync(1000);
    expect(calls).toEqual(['d-0', 'd-0']);
  });

  it('probes instances already registered when started', async () => {
    const { timers, registry, prober, calls } = await setup();
    await registry.register(instance('d-0'));
    prober.start();
    await timers.advanceAsync(0);
    expect(calls).toEqual(['d-0']);
    expect(prober.isRoutable('d-0')).toBe(true);
  });

  it('unhealthy after N consecutive failures, healthy again after M consecutive successes', async () => {
    const { timers, registry, prober, outcome, transitions } = await setup();
    prober.start();
    await registry.register(instance('d-0'));
    await timers.advanceAsync(0);
    outcome.set('d-0', 'fail');
    await timers.advanceAsync(1000);
    await timers.advanceAsync(1000);
    expect(prober.health('d-0')).toMatchObject({
      status: 'healthy',
      consecutive_failures: 2,
      last_error: 'HTTP 503',
    });
    await timers.advanceAsync(1000);
    expect(prober.health('d-0')?.status).toBe('unhealthy');
    expect(prober.routable()).toEqual([]);
    outcome.set('d-0', 'ok');
    await timers.advanceAsync(1000);
    expect(prober.health('d-0')).toMatchObject({ status: 'unhealthy', consecutive_successes: 1 });
    await timers.advanceAsync(1000);
    expect(prober.health('d-0')?.status).toBe('healthy');
    expect(transitions).toEqual([
      ['d-0', 'unknown', 'healthy'],
      ['d-0', 'healthy', 'unhealthy'],
      ['d-0', 'unhealthy', 'healthy'],
    ]);
  });

  it('a probe slower than the timeout fails and is aborted', async () => {
    const { timers, registry, prober, outcome, aborted } = await setup();
    outcome.set('d-0', 'hang');
    prober.start();
    await registry.register(instance('d-0'));
    await timers.advanceAsync(199);
    expect(prober.health('d-0')?.consecutive_failures).toBe(0);
    await timers.advanceAsync(1);
    expect(prober.health('d-0')).toMatchObject({
      consecutive_failures: 1,
      last_error: 'timed out after 200 ms',
    });
    expect(aborted).toEqual(['d-0']);
    // next probe 1000 ms after the previous one ended
    await timers.advanceAsync(1200);
    await timers.advanceAsync(1200);
    expect(prober.health('d-0')?.status).toBe('unhealthy');
  });

  it('passive failures from dispatch take an instance out; active probes bring it back', async () => {
    const { timers, registry, prober } = await setup();
    prober.start();
    await registry.register(instance('d-0'));
    await timers.advanceAsync(0);
    prober.reportFailure('d-0', 'connection refused');
    prober.reportFailure('d-0');
    prober.reportSuccess('d-0'); // a success resets the failure streak
    prober.reportFailure('d-0');
    prober.reportFailure('d-0');
    expect(prober.isRoutable('d-0')).toBe(true);
    prober.reportFailure('d-0', 'HTTP 502');
    expect(prober.health('d-0')).toMatchObject({ status: 'unhealthy', last_error: 'HTTP 502' });
    expect(prober.isRoutable('d-0')).toBe(false);
    await timers.advanceAsync(1000);
    await timers.advanceAsync(1000);
    expect(prober.isRoutable('d-0')).toBe(true);
    prober.reportFailure('unknown-id'); // ignored
    expect(prober.health('unknown-id')).toBeUndefined();
  });

  it('routable() excludes draining and paused instances even when healthy', async () => {
    const { timers, registry, prober } = await setup();
    prober.start();
    for (const id of ['a', 'b', 'c']) await registry.register(instance(id));
    await timers.advanceAsync(0);
    await registry.drain('a');
    await registry.pause('b');
    expect(prober.routable().map((r) => r.id)).toEqual(['c']);
    expect(prober.isHealthy('a')).toBe(true);
    await registry.resume('a');
    expect(prober.routable().map((r) => r.id)).toEqual(['a', 'c']);
  });

  it('forgets removed instances and stops every timer on stop()', async () => {
    const { timers, registry, prober, calls } = await setup();
    prober.start();
    await registry.register(instance('a'));
    await registry.register(instance('b'));
    await timers.advanceAsync(0);
    await registry.remove('a');
    expect(prober.health('a')).toBeUndefined();
    await timers.advanceAsync(1000);
    expect(calls.filter((c) => c === 'a')).toHaveLength(1);
    await prober.stop();
    expect(timers.pendingTimers).toBe(0);
  });

  it('a changed URL resets health to unknown and re-probes', async () => {
    const { timers, registry, prober, calls } = await setup();
    prober.start();
    await registry.register(instance('a'));
    await timers.advanceAsync(0);
    await registry.update('a', { url: 'http://127.0.0.1:2' });
    expect(prober.health('a')?.status).toBe('unknown');
    await timers.advanceAsync(0);
    expect(calls).toEqual(['a', 'a']);
    expect(prober.isRoutable('a')).toBe(true);
  });

  it('with active probing disabled, instances start healthy and only passive signals move them', async () => {
    const { timers, registry, prober, calls } = await setup({ intervalMs: 0 });
    prober.start();
    await registry.register(instance('a'));
    await timers.advanceAsync(10_000);
    expect(calls).toEqual([]);
    expect(prober.isRoutable('a')).toBe(true);
    for (let i = 0; i < 3; i++) prober.reportFailure('a');
    expect(prober.isRoutable('a')).toBe(false);
    prober.reportSuccess('a');
    prober.reportSuccess('a');
    expect(prober.isRoutable('a')).toBe(true);
  });
});

describe('HealthProber over real HTTP', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  it('follows a real /health endpoint through healthy → unhealthy → healthy, and times out a hung one', async () => {
    let status = 200;
    let hang = false;
    const server = createServer((req, res) => {
      if (req.url !== '/health') return void res.writeHead(404).end();
      if (hang) return; // never answers
      res.writeHead(status, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    });
    const url = await listen(server, 0, '127.0.0.1');
    closers.push(() => closeServer(server));
    const registry = new MemoryRegistry();
    const prober = new HealthProber(registry, {
      intervalMs: 30,
      timeoutMs: 150,
      unhealthyAfter: 2,
      healthyAfter: 2,
    });
    closers.push(() => prober.stop());
    const next = (want: HealthStatus): Promise<void> =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`not ${want} within 3 s`)), 3000);
        const off = prober.onChange((_, h) => {
          if (h.status !== want) return;
          clearTimeout(timer);
          off();
          resolve();
        });
      });
    prober.start();
    let wait = next('healthy');
    await registry.register({ id: 'real', role: 'union', url });
    await wait;
    wait = next('unhealthy');
    status = 503;
    await wait;
    expect(prober.health('real')?.last_error).toBe('HTTP 503');
    wait = next('healthy');
    status = 200;
    await wait;
    wait = next('unhealthy');
    hang = true;
    await wait;
    expect(prober.health('real')?.last_error).toBe('timed out after 150 ms');
  });
});
