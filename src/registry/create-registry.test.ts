import { describe, expect, it } from 'vitest';
import { createRegistry, registerStaticInstances } from './create-registry.js';
import { RegistryError } from './instance-record.js';

describe('createRegistry / registerStaticInstances', () => {
  it('defaults to the memory store and registers static instances with source "static", no lease', async () => {
    const registry = await createRegistry();
    expect(registry.kind).toBe('memory');
    const records = await registerStaticInstances(registry, [
      { id: 'p', role: 'prefill', url: 'http://h:1', dispatch_profile: 'handoff' },
      { id: 'd', role: 'decode', url: 'http://h:2', dispatch_profile: 'handoff' },
    ]);
    expect(records.map((r) => [r.id, r.source, r.lease])).toEqual([
      ['p', 'static', null],
      ['d', 'static', null],
    ]);
    // Loading the config again (restart, another replica) keeps an operator's drain.
    await registry.drain('p');
    await registerStaticInstances(registry, [{ id: 'p', role: 'prefill', url: 'http://h:1' }]);
    expect(registry.get('p')?.state).toBe('draining');
    await registry.close();
  });

  it('names the config entry in validation errors', async () => {
    const registry = await createRegistry({ store: 'memory' });
    const err = await registerStaticInstances(registry, [
      { id: 'p', role: 'prefill', url: 'http://h:1' },
      { id: 'd', role: 'boss' as 'decode', url: 'http://h:2' },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as RegistryError).param).toBe('instances[1].role');
    expect((err as RegistryError).message).toMatch(/^instances\[1\]\.role: /);
    await registry.close();
  });

  it('fails with "unavailable" when etcd cannot be reached', async () => {
    const t0 = performance.now();
    const err = await createRegistry({
      store: 'etcd',
      endpoints: 'http://127.0.0.1:1',
      dialTimeoutMs: 500,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as RegistryError).code).toBe('unavailable');
    expect((err as RegistryError).message).toContain('http://127.0.0.1:1');
    expect(performance.now() - t0).toBeLessThan(10_000);
  });
});
