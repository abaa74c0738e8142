import { createServer as createNetServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { registerWithCoordinator, type CoordinatorRegistration } from './heartbeat-client.js';
import { startManagementServer, type ManagementServer } from './management-api.js';
import { MemoryRegistry } from './memory-registry.js';
import { waitForEvent } from './wait-for-event.js';

const INSTANCE = {
  id: 'proxy-0',
  role: 'decode' as const,
  url: 'http://127.0.0.1:9100',
  engine: 'sglang' as const,
};

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function coordinator(options: { port?: number; adminToken?: string } = {}) {
  const registry = new MemoryRegistry();
  const server: ManagementServer = await startManagementServer({ registry, ...options });
  cleanups.push(async () => {
    await server.close();
    await registry.close();
  });
  return { registry, server };
}

function track(reg: CoordinatorRegistration): CoordinatorRegistration {
  cleanups.push(() => reg.close());
  return reg;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createNetServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe('registerWithCoordinator', () => {
  it('registers with a heartbeat lease, keeps it alive past its TTL, and deregisters on close', async () => {
    const { registry, server } = await coordinator({ adminToken: 'tok' });
    const reg = track(
      registerWithCoordinator(server.url, INSTANCE, { intervalMs: 200, leaseTtlMs: 1000, adminToken: 'tok' }),
    );
    const record = await reg.registered;
    expect(record).toMatchObject({
      id: 'proxy-0',
      source: 'self',
      lease: { ttl_ms: 1000, renew: 'heartbeat' },
    });
    expect(registry.get('proxy-0')?.dispatch_capabilities).toEqual(['concurrent_engine_sync']);
    await new Promise((r) => setTimeout(r, 1600)); // > TTL: only heartbeats keep it
    expect(registry.get('proxy-0')).toBeDefined();
    await reg.close();
    expect(registry.get('proxy-0')).toBeUndefined();
  });

  it('re-registers when the coordinator forgets the instance, keeping an operator drain', async () => {
    const { registry, server } = await coordinator();
    const reg = track(registerWithCoordinator(server.url, INSTANCE, { intervalMs: 100 }));
    await reg.registered;
    await registry.drain('proxy-0');
    await registry.remove('proxy-0'); // e.g. a coordinator restart or an expired lease
    const back = await waitForEvent(registry, (e) => e.type === 'add', 2000, 're-registration');
    expect(back.instance.id).toBe('proxy-0');
    // A heartbeat re-registration on a live record never resets state:
    await registry.drain('proxy-0');
    await new Promise((r) => setTimeout(r, 300));
    expect(registry.get('proxy-0')?.state).toBe('draining');
  });

  it('keeps trying until the coordinator comes up', async () => {
    const port = await freePort();
    const reg = track(registerWithCoordinator(`http://127.0.0.1:${port}/`, INSTANCE, { intervalMs: 200 }));
    await new Promise((r) => setTimeout(r, 300));
    const { registry } = await coordinator({ port });
    await reg.registered;
    expect(registry.get('proxy-0')).toBeDefined();
  });

  it('stops and rejects when the coordinator refuses the registration', async () => {
    const { server } = await coordinator({ adminToken: 'tok' });
    const unauthorised = track(registerWithCoordinator(server.url, INSTANCE, { intervalMs: 100 }));
    await expect(unauthorised.registered).rejects.toThrow(/HTTP 401/);
    const invalid = track(
      registerWithCoordinator(server.url, { ...INSTANCE, role: 'leader' as 'decode' }, { adminToken: 'tok' }),
    );
    await expect(invalid.registered).rejects.toThrow(/HTTP 400.*role/);
  });

  it('close with drainTimeoutMs drains first and waits for in-flight work', async () => {
    const { registry, server } = await coordinator();
    const reg = registerWithCoordinator(server.url, INSTANCE, { intervalMs: 100 });
    await reg.registered;
    const done = registry.startRequest('proxy-0')!;
    let finished = false;
    setTimeout(() => {
      finished = true;
      done();
    }, 200);
    const drained = waitForEvent(registry, (e) => e.type === 'drained', 2000, 'drained');
    await reg.close({ drainTimeoutMs: 2000 });
    await drained;
    expect(finished).toBe(true);
    expect(registry.get('proxy-0')).toBeUndefined();
  });
});
