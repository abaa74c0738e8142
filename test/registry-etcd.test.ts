/**
 * etcd-only behaviour: several Registry objects (= coordinator replicas) on one real etcd.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../src/common/http.js';
import {
  EtcdRegistry,
  HealthProber,
  waitForEvent,
  type InstanceRegistration,
  type Registry,
} from '../src/registry/index.js';
import { SKIP_ETCD, startEtcd, useEtcd } from './helpers/etcd.js';

const REGISTRY_INDEX = fileURLToPath(new URL('../src/registry/index.ts', import.meta.url));

const suite = SKIP_ETCD ? describe.skip : describe;

suite('EtcdRegistry with several replicas on one etcd', () => {
  const etcd = useEtcd({ beforeAll, beforeEach, afterAll });
  let prefixSeq = 0;
  let prefix = '';
  const opened: Registry[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];

  const replica = async (): Promise<EtcdRegistry> => {
    const r = await EtcdRegistry.create({ endpoints: etcd.endpoint, prefix });
    opened.push(r);
    return r;
  };

  beforeEach(() => {
    prefix = `/replicas-${++prefixSeq}/`;
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await Promise.all(opened.splice(0).map((r) => r.close()));
  });

  /** Subscribe before the write; other replicas learn of it through their watch. */
  const addedOn = (r: Registry, id: string) =>
    waitForEvent(r, (e) => e.type === 'add' && e.instance.id === id, 1000, `add of ${id}`);

  const decode = (id: string, url = 'http://127.0.0.1:1'): InstanceRegistration => ({
    id,
    role: 'decode',
    url,
    dispatch_capabilities: ['prefill_handoff_decode'],
  });

  it('a registration, state change and removal on one replica reach the other within 1 s', async () => {
    const a = await replica();
    const b = await replica();
    const added = waitForEvent(b, (e) => e.type === 'add' && e.instance.id === 'd-0', 1000, 'add on B');
    const t0 = performance.now();
    const record = await a.register(decode('d-0'));
    expect((await added).instance).toEqual(record);
    const addMs = performance.now() - t0;
    expect(b.get('d-0')).toEqual(record);

    const drained = waitForEvent(
      b,
      (e) => e.type === 'update' && e.instance.state === 'draining',
      1000,
      'drain on B',
    );
    await a.drain('d-0');
    await drained;
    expect(b.startRequest('d-0')).toBeUndefined();

    const removed = waitForEvent(b, (e) => e.type === 'remove', 1000, 'remove on B');
    await a.remove('d-0');
    await removed;
    expect(b.list()).toEqual([]);
    expect(addMs).toBeLessThan(1000);
  });

  it('a registration on one replica becomes routable on another (with health probing) within 1 s', async () => {
    const health: Server = createServer((req, res) => {
      res.writeHead(req.url === '/health' ? 200 : 404).end();
    });
    const url = await listen(health, 0, '127.0.0.1');
    cleanups.push(() => closeServer(health));
    const a = await replica();
    const b = await replica();
    const prober = new HealthProber(b, { intervalMs: 5000, timeoutMs: 500 }).start();
    cleanups.push(() => prober.stop());
    const routable = new Promise<number>((resolve) => {
      const t0 = performance.now();
      prober.onChange((id, h) => {
        if (id === 'd-1' && h.status === 'healthy') resolve(performance.now() - t0);
      });
    });
    await a.register(decode('d-1', url));
    const ms = await Promise.race([
      routable,
      new Promise<number>((_, reject) =>
        setTimeout(() => reject(new Error('not routable on B within 1 s')), 1000),
      ),
    ]);
    expect(ms).toBeLessThan(1000);
    expect(prober.routable().map((r) => r.id)).toEqual(['d-1']);
  });

  it('a late-starting replica loads the existing fleet and ignores corrupt records', async () => {
    const a = await replica();
    await a.register(decode('d-0'));
    const raw = new Etcd3({ hosts: etcd.endpoint });
    cleanups.push(() => raw.close());
    await raw.put(`${prefix}instances/garbage`).value('{not json');
    const late = await replica();
    expect(late.list().map((r) => r.id)).toEqual(['d-0']);
  });

  it("an operator's pause lives in etcd without a lease: a restarted coordinator re-registers it paused", async () => {
    const a = await replica();
    await a.register(decode('d-0'), { source: 'self', lease: { ttlMs: 1000, renew: 'heartbeat' } });
    await a.pause('d-0');
    await a.close({ deregister: false }); // the coordinator stops; the proxy's lease runs out meanwhile
    const raw = new Etcd3({ hosts: etcd.endpoint });
    cleanups.push(() => raw.close());
    const restarted = await replica();
    if (restarted.get('d-0')) {
      await waitForEvent(restarted, (e) => e.type === 'remove', 5000, 'lease expiry');
    }
    expect(await raw.get(`${prefix}state/d-0`).string()).toBe('paused');
    const again = await restarted.register(decode('d-0'), { source: 'self' });
    expect(again.state).toBe('paused');
    await restarted.resume('d-0');
    expect(await raw.get(`${prefix}state/d-0`).string()).toBeNull();
  });

  it('an owner lease expires when its owner stops renewing it: the instance leaves every replica', async () => {
    const a = await replica();
    const b = await replica();
    const owner = await EtcdRegistry.create({ endpoints: etcd.endpoint, prefix });
    const seen = Promise.all([addedOn(a, 'owned'), addedOn(b, 'owned')]);
    await owner.register(decode('owned'), { lease: { ttlMs: 1000, renew: 'owner' } });
    await seen;
    expect(a.get('owned')?.lease).toEqual({ ttl_ms: 1000, renew: 'owner' });
    // The owner keeps its lease alive well past the TTL...
    await new Promise((r) => setTimeout(r, 2000));
    expect(a.get('owned')).toBeDefined();
    expect(b.get('owned')).toBeDefined();
    // ...then "dies": stops renewing without revoking.
    const goneA = waitForEvent(
      a,
      (e) => e.type === 'remove' && e.instance.id === 'owned',
      5000,
      'expiry on A',
    );
    const goneB = waitForEvent(
      b,
      (e) => e.type === 'remove' && e.instance.id === 'owned',
      5000,
      'expiry on B',
    );
    await owner.close({ deregister: false });
    await Promise.all([goneA, goneB]);
    expect(a.list()).toEqual([]);
    expect(b.list()).toEqual([]);
  });

  it('a registering process killed with SIGKILL disappears from every replica once its lease expires', async () => {
    const a = await replica();
    const b = await replica();
    const dir = mkdtempSync(join(tmpdir(), 'motor-owner-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const script = join(dir, 'owner.mts');
    writeFileSync(
      script,
      `import { EtcdRegistry } from ${JSON.stringify(REGISTRY_INDEX)};
const r = await EtcdRegistry.create({ endpoints: ${JSON.stringify(etcd.endpoint)}, prefix: ${JSON.stringify(prefix)} });
await r.register({ id: 'proc', role: 'prefill', url: 'http://127.0.0.1:2' }, { lease: { ttlMs: 1000, renew: 'owner' } });
console.log('registered');
setInterval(() => {}, 1000);
`,
    );
    const added = waitForEvent(
      a,
      (e) => e.type === 'add' && e.instance.id === 'proc',
      15_000,
      'add from child',
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    cleanups.push(async () => {
      child.kill('SIGKILL');
      await exited;
    });
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`owner exited early (${code}): ${stderr}`)));
      createInterface({ input: child.stdout }).on('line', (line) => line === 'registered' && resolve());
    });
    await added;
    expect(b.get('proc')).toBeDefined();
    const goneA = waitForEvent(
      a,
      (e) => e.type === 'remove' && e.instance.id === 'proc',
      5000,
      'expiry on A',
    );
    const goneB = waitForEvent(
      b,
      (e) => e.type === 'remove' && e.instance.id === 'proc',
      5000,
      'expiry on B',
    );
    const t0 = performance.now();
    child.kill('SIGKILL');
    await Promise.all([goneA, goneB]);
    expect(performance.now() - t0).toBeLessThan(5000);
  });

  it('a graceful owner close deregisters at once', async () => {
    const a = await replica();
    const owner = await EtcdRegistry.create({ endpoints: etcd.endpoint, prefix });
    const seen = addedOn(a, 'owned');
    await owner.register(decode('owned'), { lease: { ttlMs: 30_000, renew: 'owner' } });
    await seen;
    expect(a.get('owned')).toBeDefined();
    const gone = waitForEvent(a, (e) => e.type === 'remove', 1000, 'deregistration within 1 s');
    await owner.close();
    await gone;
  });

  it('a heartbeat lease taken on one replica can be renewed through another', async () => {
    const a = await replica();
    const b = await replica();
    const seen = addedOn(b, 'hb');
    await a.register(decode('hb'), { lease: { ttlMs: 1000, renew: 'heartbeat' } });
    await seen;
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 300));
      expect(await b.heartbeat('hb')).toBe(true);
    }
    expect(a.get('hb')).toBeDefined();
    await waitForEvent(a, (e) => e.type === 'remove', 5000, 'expiry after renewals stop');
    expect(await b.heartbeat('hb')).toBe(false);
  });

  it('drain issued on one replica: the other refuses new work, finishes its in-flight work, reports drained', async () => {
    const a = await replica();
    const b = await replica();
    const seen = addedOn(b, 'd-0');
    await a.register(decode('d-0'));
    await seen;
    const completed: number[] = [];
    const inflight = Array.from({ length: 4 }, (_, i) => {
      const done = b.startRequest('d-0')!;
      expect(done).toBeTypeOf('function');
      return new Promise<void>((resolve) =>
        setTimeout(
          () => {
            completed.push(i);
            done();
            resolve();
          },
          150 + 50 * i,
        ),
      );
    });
    const drainedOnB = waitForEvent(b, (e) => e.type === 'drained', 5000, 'drained on B');
    const seenOnB = waitForEvent(
      b,
      (e) => e.type === 'update' && e.instance.state === 'draining',
      1000,
      'drain on B',
    );
    await a.drain('d-0');
    await seenOnB;
    expect(b.startRequest('d-0')).toBeUndefined();
    expect(b.inFlight('d-0')).toBe(4);
    expect(await b.awaitDrained('d-0', 5000)).toBe(true);
    await drainedOnB;
    await Promise.all(inflight);
    expect(completed.sort()).toEqual([0, 1, 2, 3]);
  });

  it('when etcd goes away, reads keep serving the last view and writes fail as unavailable', async () => {
    const own = await startEtcd();
    cleanups.push(() => own.stop());
    const r = await EtcdRegistry.create({ endpoints: own.endpoint, prefix, dialTimeoutMs: 1000 });
    opened.push(r);
    await r.register(decode('d-0'));
    await own.stop();
    expect(r.list().map((x) => x.id)).toEqual(['d-0']);
    const t0 = performance.now();
    const err = await r.update('d-0', { models: ['m'] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'RegistryError', code: 'unavailable' });
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(r.get('d-0')?.models).toEqual([]);
  });

  it('concurrent writes from two replicas compose (compare-and-swap, no lost update)', async () => {
    const a = await replica();
    const b = await replica();
    const seen = addedOn(b, 'd-0');
    await a.register(decode('d-0'));
    await seen;
    await Promise.all([
      a.update('d-0', { models: ['m1'] }),
      b.pause('d-0'),
      a.update('d-0', { labels: { z: '1' } }),
    ]);
    // Authoritative state: a replica started now reads it from etcd.
    const fresh = await replica();
    expect(fresh.get('d-0')).toMatchObject({ models: ['m1'], state: 'paused', labels: { z: '1' } });
    // Both writers' views converge on it through their watches (bounded).
    const converged = (): boolean =>
      JSON.stringify(a.get('d-0')) === JSON.stringify(fresh.get('d-0')) &&
      JSON.stringify(b.get('d-0')) === JSON.stringify(fresh.get('d-0'));
    const deadline = Date.now() + 1000;
    while (!converged() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(a.get('d-0')).toEqual(fresh.get('d-0'));
    expect(b.get('d-0')).toEqual(fresh.get('d-0'));
  });
});
