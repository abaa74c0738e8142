/**
 * One contract for every registry store: the same cases run against the in-memory store and against
 * the etcd store talking to a real etcd started for this file.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  EtcdRegistry,
  MemoryRegistry,
  RegistryError,
  waitForEvent,
  type InstanceRegistration,
  type Registry,
  type RegistryEvent,
} from '../src/registry/index.js';
import { SKIP_ETCD, useEtcd } from './helpers/etcd.js';

interface StoreFixture {
  name: string;
  /** Registers the store's lifecycle hooks inside the suite. */
  setup(): void;
  create(): Promise<Registry>;
}

const memoryStore: StoreFixture = {
  name: 'memory',
  setup: () => undefined,
  create: async () => new MemoryRegistry(),
};

let etcd: { readonly endpoint: string } | undefined;
let prefixSeq = 0;
const etcdStore: StoreFixture = {
  name: 'etcd',
  setup: () => {
    etcd = useEtcd({ beforeAll, beforeEach, afterAll });
  },
  // A fresh key prefix per test keeps the tests independent on one server.
  create: () => EtcdRegistry.create({ endpoints: etcd!.endpoint, prefix: `/contract-${++prefixSeq}/` }),
};

const NIXL = { kv_transfer_config: { kv_connector: 'NixlConnector', kv_role: 'kv_producer' } };

function prefill(id: string, extra: Partial<InstanceRegistration> = {}): InstanceRegistration {
  return { id, role: 'prefill', url: `http://127.0.0.1:9001/`, engine_config: NIXL, ...extra };
}

function collect(registry: Registry): RegistryEvent[] {
  const events: RegistryEvent[] = [];
  registry.watch((e) => events.push(e));
  return events;
}

async function expectRegistryError(
  promise: Promise<unknown>,
  code: RegistryError['code'],
  param?: string,
): Promise<RegistryError> {
  const err = await promise.then(
    () => {
      throw new Error('expected a RegistryError');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RegistryError);
  const registryError = err as RegistryError;
  expect(registryError.code).toBe(code);
  if (param !== undefined) expect(registryError.param).toBe(param);
  return registryError;
}

for (const store of [memoryStore, etcdStore]) {
  const suite = store.name === 'etcd' && SKIP_ETCD ? describe.skip : describe;
  suite(`Registry contract: ${store.name} store`, () => {
    let registry: Registry;
    const opened: Registry[] = [];
    const open = async (): Promise<Registry> => {
      const r = await store.create();
      opened.push(r);
      return r;
    };

    store.setup();
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((r) => r.close()));
    });

    it('registers an instance, normalising it and deriving capabilities from the engine config', async () => {
      registry = await open();
      const events = collect(registry);
      const record = await registry.register(prefill('p-0', { models: ['llama'], labels: { zone: 'a' } }));
      expect(record).toMatchObject({
        id: 'p-0',
        role: 'prefill',
        url: 'http://127.0.0.1:9001',
        engine: 'vllm',
        mode: 'proxy',
        dispatch_capabilities: ['prefill_handoff_decode'],
        dispatch_profile: 'handoff',
        models: ['llama'],
        labels: { zone: 'a' },
        state: 'active',
        source: 'api',
        lease: null,
      });
      expect(record.registered_at_ms).toBeGreaterThan(0);
      expect(registry.get('p-0')).toEqual(record);
      expect(registry.list()).toEqual([record]);
      expect(events).toEqual([{ type: 'add', instance: record }]);
    });

    it('derives capabilities per engine and fails closed for an unclassified vLLM', async () => {
      registry = await open();
      const sglang = await registry.register({
        id: 'sg',
        role: 'decode',
        url: 'http://h:1',
        engine: 'sglang',
      });
      const layerwise = await registry.register({
        id: 'lw',
        role: 'decode',
        url: 'http://h:2',
        engine_config: { kv_transfer_config: { kv_connector: 'MooncakeLayerwiseConnector' } },
      });
      const bare = await registry.register({ id: 'bare', role: 'decode', url: 'http://h:3' });
      const explicit = await registry.register({
        id: 'x',
        role: 'union',
        url: 'http://h:4',
        dispatch_capabilities: ['concurrent_engine_sync', 'concurrent_engine_sync'],
      });
      const profiled = await registry.register({
        id: 'pr',
        role: 'decode',
        url: 'http://h:5',
        dispatch_profile: 'trigger',
      });
      expect(sglang.dispatch_capabilities).toEqual(['concurrent_engine_sync']);
      expect(layerwise.dispatch_capabilities).toEqual(['concurrent_engine_sync']);
      expect(bare).toMatchObject({ dispatch_capabilities: [], dispatch_profile: 'unknown' });
      expect(explicit).toMatchObject({
        dispatch_capabilities: ['concurrent_engine_sync'],
        dispatch_profile: null,
      });
      expect(profiled.dispatch_capabilities).toEqual(['concurrent_engine_sync']);
      expect(
        registry
          .list()
          .map((r) => r.id)
          .sort(),
      ).toEqual(['bare', 'lw', 'pr', 'sg', 'x']);
    });

    it('rejects invalid registrations with an error naming the field, storing nothing', async () => {
      registry = await open();
      const bad: [unknown, string][] = [
        [{ ...prefill('p'), role: 'leader' }, 'role'],
        [{ ...prefill('p'), url: 'ftp://x' }, 'url'],
        [{ ...prefill('p'), url: 'not a url' }, 'url'],
        [{ ...prefill('p'), id: 'has/slash' }, 'id'],
        [{ ...prefill('p'), colour: 'red' }, 'colour'],
        [{ ...prefill('p'), dispatch_capabilities: ['warp'] }, 'dispatch_capabilities[0]'],
        [{ ...prefill('p'), engine_config: undefined, dispatch_profile: 'fastest' }, 'dispatch_profile'],
        [{ ...prefill('p'), labels: { zone: 3 } }, 'labels.zone'],
      ];
      for (const [input, param] of bad) {
        const err = await expectRegistryError(
          registry.register(input as InstanceRegistration),
          'invalid_instance',
          param,
        );
        expect(err.message.startsWith(`${param}: `)).toBe(true);
      }
      expect(registry.list()).toEqual([]);
    });

    it('re-registration is an upsert that keeps registered_at_ms and the operator-set state', async () => {
      registry = await open();
      const first = await registry.register(prefill('p-0'));
      await registry.drain('p-0');
      const events = collect(registry);
      const again = await registry.register(prefill('p-0', { url: 'http://127.0.0.1:9002', models: ['m'] }));
      expect(again).toMatchObject({ url: 'http://127.0.0.1:9002', models: ['m'], state: 'draining' });
      expect(again.registered_at_ms).toBe(first.registered_at_ms);
      expect(events.map((e) => e.type)).toEqual(['update']);
      const explicit = await registry.register(prefill('p-0', { state: 'active' }));
      expect(explicit.state).toBe('active');
    });

    it('updates fields, rejecting unknown ids and invalid patches', async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      const events = collect(registry);
      const updated = await registry.update('p-0', { labels: { zone: 'b' }, dispatch_capabilities: [] });
      expect(updated).toMatchObject({
        labels: { zone: 'b' },
        dispatch_capabilities: [],
        dispatch_profile: null,
      });
      expect(registry.get('p-0')).toEqual(updated);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ type: 'update', instance: updated });
      await expectRegistryError(registry.update('nope', { models: [] }), 'not_found', 'id');
      await expectRegistryError(
        registry.update('p-0', { role: 'boss' } as unknown as { role: 'prefill' }),
        'invalid_instance',
        'role',
      );
    });

    it('removes instances and reports unknown ids', async () => {
      registry = await open();
      const record = await registry.register(prefill('p-0'));
      const events = collect(registry);
      expect(await registry.remove('p-0')).toBe(true);
      expect(registry.get('p-0')).toBeUndefined();
      expect(registry.list()).toEqual([]);
      expect(events).toEqual([{ type: 'remove', instance: record }]);
      expect(await registry.remove('p-0')).toBe(false);
    });

    it('pause and drain refuse new work; resume accepts it again', async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      const done = registry.startRequest('p-0');
      expect(done).toBeTypeOf('function');
      expect((await registry.pause('p-0')).state).toBe('paused');
      expect(registry.startRequest('p-0')).toBeUndefined();
      expect((await registry.resume('p-0')).state).toBe('active');
      const again = registry.startRequest('p-0');
      expect(again).toBeTypeOf('function');
      expect((await registry.drain('p-0')).state).toBe('draining');
      expect(registry.startRequest('p-0')).toBeUndefined();
      expect(registry.startRequest('unknown')).toBeUndefined();
      done!();
      again!();
      expect(registry.inFlight('p-0')).toBe(0);
      await expectRegistryError(registry.drain('nope'), 'not_found');
    });

    it('drain waits for in-flight work: drained fires once, after the last request, and none is lost', async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      // The test ends each request itself, after the drain has begun: requests that ended on timers
      // could all end before a slow store (etcd at load) finished the drain, leaving nothing to wait for.
      const dones = Array.from({ length: 5 }, () => registry.startRequest('p-0')!);
      expect(registry.inFlight('p-0')).toBe(5);
      const events = collect(registry);
      const drainedEvent = waitForEvent(registry, (e) => e.type === 'drained', 20_000, 'drained event');
      await registry.drain('p-0');
      expect(registry.startRequest('p-0')).toBeUndefined();
      expect(await registry.awaitDrained('p-0', 1)).toBe(false);
      const drainedWait = registry.awaitDrained('p-0', 20_000);
      for (const [i, done] of dones.entries()) {
        expect(
          events.some((e) => e.type === 'drained'),
          `drained before request ${i} ended`,
        ).toBe(false);
        expect(registry.inFlight('p-0')).toBe(5 - i);
        done();
        done(); // idempotent
      }
      expect(await drainedWait).toBe(true);
      const drained = await drainedEvent;
      expect(registry.inFlight('p-0')).toBe(0);
      expect(drained.instance).toMatchObject({ id: 'p-0', state: 'draining' });
      expect(events.filter((e) => e.type === 'drained')).toHaveLength(1);
      expect(events.findIndex((e) => e.type === 'drained')).toBeGreaterThan(
        events.findIndex((e) => e.type === 'update'),
      );
    });

    it('drain of an idle instance reports drained at once', async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      const drained = waitForEvent(registry, (e) => e.type === 'drained', 2000, 'drained event');
      await registry.drain('p-0');
      await drained;
      expect(await registry.awaitDrained('p-0', 0)).toBe(true);
    });

    it('watch can replay the current fleet, and unsubscribing stops delivery', async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      await registry.register(prefill('p-1'));
      const replayed: RegistryEvent[] = [];
      const unwatch = registry.watch((e) => replayed.push(e), { replay: true });
      expect(replayed.map((e) => [e.type, e.instance.id]).sort()).toEqual([
        ['add', 'p-0'],
        ['add', 'p-1'],
      ]);
      unwatch();
      await registry.remove('p-0');
      expect(replayed).toHaveLength(2);
    });

    it('a throwing listener does not stop the others', async () => {
      registry = await open();
      registry.watch(() => {
        throw new Error('boom');
      });
      const events = collect(registry);
      await registry.register(prefill('p-0'));
      expect(events.map((e) => e.type)).toEqual(['add']);
    });

    it('a heartbeat lease lives while renewed and expires, with a remove event, when renewals stop', async () => {
      registry = await open();
      const record = await registry.register(prefill('hb'), { lease: { ttlMs: 1000, renew: 'heartbeat' } });
      expect(record.lease).toEqual({ ttl_ms: 1000, renew: 'heartbeat' });
      for (let i = 0; i < 5; i++) {
        await new Promise((r) => setTimeout(r, 300));
        expect(await registry.heartbeat('hb')).toBe(true);
      }
      expect(registry.get('hb')).toBeDefined();
      const removed = await waitForEvent(registry, (e) => e.type === 'remove', 5000, 'lease expiry');
      expect(removed.instance.id).toBe('hb');
      expect(registry.get('hb')).toBeUndefined();
      expect(await registry.heartbeat('hb')).toBe(false);
    });

    // Issue 15 finding 9: the operator's state is kept apart from the (leased) registration.
    it.each([
      { action: 'pause', state: 'paused' },
      { action: 'drain', state: 'draining' },
    ] as const)(
      "an operator's $action outlives lease expiry: the id registers again $state until resumed",
      async ({ action, state }) => {
        registry = await open();
        const lease = { ttlMs: 1000, renew: 'heartbeat' } as const;
        await registry.register(prefill('hb'), { source: 'self', lease });
        await registry[action]('hb');
        const expired = waitForEvent(registry, (e) => e.type === 'remove', 5000, 'lease expiry');
        await expired;
        const again = await registry.register(prefill('hb'), { source: 'self', lease });
        expect(again.state).toBe(state);
        expect(registry.startRequest('hb')).toBeUndefined();
        expect((await registry.resume('hb')).state).toBe('active');
        await registry.remove('hb');
        expect((await registry.register(prefill('hb'), { source: 'self', lease })).state).toBe('active');
      },
    );

    it("remove() ends the operator's hold; an explicit registration state replaces it", async () => {
      registry = await open();
      await registry.register(prefill('p-0'));
      await registry.pause('p-0');
      expect(await registry.remove('p-0')).toBe(true);
      expect(await registry.remove('p-0')).toBe(false);
      expect((await registry.register(prefill('p-0'))).state).toBe('active');
      await registry.register(prefill('p-1', { state: 'paused' }));
      await registry.register(prefill('p-1', { state: 'active' }));
      expect((await registry.register(prefill('p-1'))).state).toBe('active');
    });

    it('rejects writes after close', async () => {
      registry = await store.create();
      await registry.close();
      await expectRegistryError(registry.register(prefill('p-0')), 'unavailable');
    });
  });
}
