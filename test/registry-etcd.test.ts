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
/** How long a test waits for a registry event: only a bound against a hang, far above a loaded machine's lag. */
const EVENT_WAIT_MS = 20_000;

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
    waitForEvent(r, (e) => e.type === 'add' && e.instance.id === id, EVENT_WAIT_MS, `add of ${id}`);

  const decode = (id: string, url = 'http://127.0.0.1:1'): InstanceRegistration => ({
    id,
    role: 'decode',
    url,
    dispatch_capabilities: ['prefill_handoff_decode'],
  });

  // The watch is a replica's only path to another's writes (no periodic list): each event arriving
  // proves it; how fast is a benchmark's question, not a test's on a loaded machine.
  it('a registration, state change and removal on one replica reach the other through the watch', async () => {
    const a = await replica();
    const b = await replica();
    const added = waitForEvent(
      b,
      (e) => e.type === 'add' && e.instance.id === 'd-0',
      EVENT_WAIT_MS,
      'add on B',
    );
    const record = await a.register(decode('d-0'));
    expect((await added).instance).toEqual(record);
    expect(b.get('d-0')).toEqual(record);

    const drained = waitForEvent(
      b,
      (e) => e.type === 'update' && e.instance.state === 'draining',
      EVENT_WAIT_MS,
      'drain on B',
    );
    await a.drain('d-0');
    await drained;
    expect(b.startRequest('d-0')).toBeUndefined();

    const removed = waitForEvent(b, (e) => e.type === 'remove', EVENT_WAIT_MS, 'remove on B');
    await a.remove('d-0');
    await removed;
    expect(b.list()).toEqual([]);
  });

  it('a registration on one replica becomes routable on another (with health probing)', async () => {
    const health: Server = createServer((req, res) => {
      res.writeHead(req.url === '/health' ? 200 : 404).end();
    });
    const url = await listen(health, 0, '127.0.0.1');
    cleanups.push(() => closeServer(health));
    const a = await replica();
    const b = await replica();
    const prober = new HealthProber(b, { intervalMs: 5000, timeoutMs: 500 }).start();
    cleanups.push(() => prober.stop());
    // the prober's interval is 5 s: health within the test means the add itself triggered a probe
    const routable = new Promise<void>((resolve) => {
      prober.onChange((id, h) => {
        if (id === 'd-1' && h.status === 'healthy') resolve();
      });
    });
    await a.register(decode('d-1', url));
    await routable;
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
      await waitForEvent(restarted, (e) => e.type === 'remove', EVENT_WAIT_MS, 'lease expiry');
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
    // 3 s, not 1 s: the owner's keep-alives (every third of the TTL) must not miss on a loaded machine
    await owner.register(decode('owned'), { lease: { ttlMs: 3000, renew: 'owner' } });
    await seen;
    expect(a.get('owned')?.lease).toEqual({ ttl_ms: 3000, renew: 'owner' });
    // The owner keeps its lease alive well past the TTL (the lease is wall-clock time)...
    await new Promise((r) => setTimeout(r, 6000));
    expect(a.get('owned')).toBeDefined();
    expect(b.get('owned')).toBeDefined();
    // ...then "dies": stops renewing without revoking.
    const goneA = waitForEvent(
      a,
      (e) => e.type === 'remove' && e.instance.id === 'owned',
      EVENT_WAIT_MS,
      'expiry on A',
    );
    const goneB = waitForEvent(
      b,
      (e) => e.type === 'remove' && e.instance.id === 'owned',
      EVENT_WAIT_MS,
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
      EVENT_WAIT_MS,
      'expiry on A',
    );
    const goneB = waitForEvent(
      b,
      (e) => e.type === 'remove' && e.instance.id === 'proc',
      EVENT_WAIT_MS,
      'expiry on B',
    );
    // no one else removes it: the remove events are the lease's expiry
    child.kill('SIGKILL');
    await Promise.all([goneA, goneB]);
  });

  it('a graceful owner close deregisters at once', async () => {
    const a = await replica();
    const owner = await EtcdRegistry.create({ endpoints: etcd.endpoint, prefix });
    const seen = addedOn(a, 'owned');
    await owner.register(decode('owned'), { lease: { ttlMs: 30_000, renew: 'owner' } });
    await seen;
    expect(a.get('owned')).toBeDefined();
    // at once: the 30 s lease has not run out when the remove arrives (EVENT_WAIT_MS is below it)
    const gone = waitForEvent(a, (e) => e.type === 'remove', EVENT_WAIT_MS, 'deregistration');
    await owner.close();
    await gone;
  });

  it('a heartbeat lease taken on one replica can be renewed through another', async () => {
    const a = await replica();
    const b = await replica();
    const seen = addedOn(b, 'hb');
    // the lease is wall-clock time: renewals 1 s apart outlast a 3 s lease only because each renews it,
    // with 2 s of slack per renewal for a loaded machine
    await a.register(decode('hb'), { lease: { ttlMs: 3000, renew: 'heartbeat' } });
    await seen;
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      expect(await b.heartbeat('hb')).toBe(true);
    }
    expect(a.get('hb')).toBeDefined();
    await waitForEvent(a, (e) => e.type === 'remove', EVENT_WAIT_MS, 'expiry after renewals stop');
    expect(await b.heartbeat('hb')).toBe(false);
  });

  it('drain issued on one replica: the other refuses new work, finishes its in-flight work, reports drained', async () => {
    const a = await replica();
    const b = await replica();
    const seen = addedOn(b, 'd-0');
    await a.register(decode('d-0'));
    await seen;
    // The test ends B's in-flight requests itself once the drain has reached B: requests ending on
    // timers could all end before the drain arrived through the watch on a loaded machine.
    const dones = Array.from({ length: 4 }, () => b.startRequest('d-0')!);
    for (const done of dones) expect(done).toBeTypeOf('function');
    const drainedOnB = waitForEvent(b, (e) => e.type === 'drained', EVENT_WAIT_MS, 'drained on B');
    const seenOnB = waitForEvent(
      b,
      (e) => e.type === 'update' && e.instance.state === 'draining',
      EVENT_WAIT_MS,
      'drain on B',
    );
    await a.drain('d-0');
    await seenOnB;
    expect(b.startRequest('d-0')).toBeUndefined();
    expect(b.inFlight('d-0')).toBe(4);
    const drainedWait = b.awaitDrained('d-0', EVENT_WAIT_MS);
    for (const [i, done] of dones.entries()) {
      expect(await b.awaitDrained('d-0', 0), `drained with ${4 - i} in flight`).toBe(false);
      done();
    }
    expect(await drainedWait).toBe(true);
    await drainedOnB;
    expect(b.inFlight('d-0')).toBe(0);
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
    while (!converged()) await new Promise((r) => setTimeout(r, 10)); // the test's timeout bounds it
    expect(a.get('d-0')).toEqual(fresh.get('d-0'));
    expect(b.get('d-0')).toEqual(fresh.get('d-0'));
  });
});
