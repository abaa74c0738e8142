import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MotorError } from '../src/common/motor-error.js';
import { previousItems } from '../src/coordinator/apis/openai-responses/conversation.js';
import { RedisResponseStore } from '../src/state/response-store/redis-store.js';
import type { StoredResponse } from '../src/state/response-store/response-store.js';
import { RedisServer } from './helpers/redis-server.js';

/**
 * The Redis response store against a real `redis-server` (Debian package) on an ephemeral loopback
 * port: two store instances stand for two coordinator replicas sharing it.
 */

let redis: RedisServer;
const stores: RedisResponseStore[] = [];

const PREFIX = 'motor-test:response:';

async function newStore(
  ttlSeconds = 60,
  onError: (err: Error) => void = () => {},
): Promise<RedisResponseStore> {
  const s = new RedisResponseStore({
    url: redis.url,
    keyPrefix: PREFIX,
    commandTimeoutMs: 5_000,
    maxRecordBytes: 4096,
    ttlSeconds,
    onError,
  });
  stores.push(s);
  await s.start();
  return s;
}

const record = (id: string, previousId: string | null, tenant = 't1', pad = 0): StoredResponse => ({
  id,
  tenant,
  previousId,
  input: [{ type: 'message', role: 'user', content: `q-${id}${'x'.repeat(pad)}` }],
  response: { id, output: [{ type: 'message', role: 'assistant', content: `a-${id}` }] },
});

const RA = `resp_${'a'.repeat(32)}`;
const RB = `resp_${'b'.repeat(32)}`;

beforeAll(async () => {
  redis = await RedisServer.start();
}, 60_000);

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await redis?.close();
});

describe('RedisResponseStore on a real redis-server', () => {
  it('a record put by one replica is read, chained and deleted by another; tenants are scoped', async () => {
    const [a, b] = [await newStore(), await newStore()];
    expect(a.available() && b.available()).toBe(true);
    await a.put(record(RA, null));
    await b.put(record(RB, RA));
    expect(await b.get(RA, 't1')).toEqual(record(RA, null));
    const items = await previousItems(a, 't1', RB, 10);
    expect(items.map((i) => i.content)).toEqual([`q-${RA}`, `a-${RA}`, `q-${RB}`, `a-${RB}`]);
    // another tenant sees nothing and deletes nothing
    expect(await a.get(RA, 't2')).toBeNull();
    expect(await a.delete(RA, 't2')).toBe(false);
    expect(await b.delete(RA, 't1')).toBe(true);
    expect(await a.get(RA, 't1')).toBeNull();
    expect(await a.delete(RA, 't1')).toBe(false);
    await expect(previousItems(a, 't1', RB, 10)).rejects.toThrow(/no longer stored/);
  });

  it('each record is one key with the configured TTL (Redis expires it)', async () => {
    const s = await newStore(123);
    await s.put(record(RA, null));
    const raw = createClient({ url: redis.url });
    await raw.connect();
    try {
      const ttl = await raw.ttl(`${PREFIX}${RA}`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(123);
      // an expired key (here expired at once by Redis) reads as unknown
      await raw.pExpire(`${PREFIX}${RA}`, 1);
      for (;;) if ((await raw.exists(`${PREFIX}${RA}`)) === 0) break;
      expect(await s.get(RA, 't1')).toBeNull();
    } finally {
      await raw.close();
    }
  });

  it('a record over maxStoredBytes is refused and nothing is written', async () => {
    const s = await newStore();
    const RC = `resp_${'c'.repeat(32)}`;
    await expect(s.put(record(RC, null, 't1', 8192))).rejects.toMatchObject({ status: 400, param: 'store' });
    expect(await s.get(RC, 't1')).toBeNull();
  });

  it('Redis down → unavailable, every command a 503 store_unavailable at once; back up → served again', async () => {
    let lost = (): void => {};
    const failed = new Promise<void>((r) => (lost = r));
    const s = await newStore(60, () => lost());
    await s.put(record(RA, null));
    await redis.stop();
    await failed; // node-redis reports the lost connection
    expect(s.available()).toBe(false);
    for (const op of [() => s.put(record(RB, null)), () => s.get(RA, 't1'), () => s.delete(RA, 't1')]) {
      let err: unknown;
      try {
        await op();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(MotorError);
      expect((err as MotorError).code).toBe('store_unavailable');
      expect((err as MotorError).status).toBe(503);
    }
    await redis.restart();
    // the client reconnects in the background: wait for its own readiness, bounded by the test timeout
    while (!s.available()) await new Promise((r) => setTimeout(r, 20));
    await s.put(record(RB, null));
    expect(await s.get(RB, 't1')).not.toBeNull();
  }, 30_000);
});
