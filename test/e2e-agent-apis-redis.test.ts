import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../src/simulator/testing/index.js';
import {
  MODEL,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';
import { RedisServer } from './helpers/redis-server.js';

/**
 * Two coordinator replicas sharing one real `redis-server` as the response store (`responses.store:
 * redis`): a response created on replica A is retrieved and continued on replica B, scoped to the API
 * key; with Redis down, `store: true` is a 503 `store_unavailable` and `store: false` is still served.
 */

let redis: RedisServer;
let A: CoordinatorHandle;
let B: CoordinatorHandle;

beforeAll(async () => {
  try {
    redis = await RedisServer.start();
    const u = await startSim({ role: 'union' });
    const config = {
      server: { apiKeys: ['key-one', 'key-two'] },
      responses: { store: 'redis', redis: { url: redis.url, keyPrefix: 'motor-e2e:' } },
      instances: [{ id: 'U', url: u.url, role: 'union', mode: 'direct', models: [MODEL] }],
    };
    [A, B] = await Promise.all([startCoordinatorProcess(config), startCoordinatorProcess(config)]);
    for (const c of [A, B])
      while ((await fetch(`${c.url}/ready`)).status !== 200) await new Promise((r) => setImmediate(r));
  } catch (err) {
    await stopAllSpawned();
    await redis?.close();
    throw err;
  }
}, 120_000);

afterAll(async () => {
  await Promise.all([A?.stop(), B?.stop()]);
  await stopAllSpawned();
  await redis?.close();
});

const client = (c: CoordinatorHandle, key = 'key-one') =>
  new OpenAI({ baseURL: `${c.url}/v1`, apiKey: key, maxRetries: 0 });

describe('responses store shared by two coordinators over Redis', () => {
  it('created on A, continued via previous_response_id, retrieved, listed and deleted on B', async () => {
    const first = await client(A).responses.create({
      model: MODEL,
      input: 'hello there',
      max_output_tokens: 8,
    });
    const seen = await client(B).responses.retrieve(first.id);
    expect(seen.id).toBe(first.id);
    expect(seen.output_text).toBe(first.output_text);
    const second = await client(B).responses.create({
      model: MODEL,
      input: 'and again',
      previous_response_id: first.id,
      max_output_tokens: 8,
    });
    expect(second.previous_response_id).toBe(first.id);
    // B replayed A's turn: its prompt holds the first turn's input and output
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    const items = await client(A).responses.inputItems.list(second.id);
    expect(items.data.map((i) => (i.type === 'message' ? i.content : null))).toEqual([
      [{ type: 'input_text', text: 'and again' }],
    ]);
    // another API key sees nothing of it, on either replica
    for (const c of [A, B]) {
      await expect(client(c, 'key-two').responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
      await expect(
        client(c, 'key-two').responses.create({ model: MODEL, input: 'x', previous_response_id: first.id }),
      ).rejects.toMatchObject({ status: 400 });
    }
    await client(B).responses.delete(first.id);
    await expect(client(A).responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
  });

  it('Redis down: store true → 503 store_unavailable, store false still served; back up → stored again', async () => {
    await redis.stop();
    const body = { model: MODEL, input: 'hello there', max_output_tokens: 4 };
    const auth = { authorization: 'Bearer key-one' };
    // the replicas notice the lost connection on their own: wait for their answer to change
    for (const c of [A, B]) {
      let r = await http(c.url, 'POST', '/v1/responses', body, auth);
      while (r.status === 200) r = await http(c.url, 'POST', '/v1/responses', body, auth);
      expect(r.status).toBe(503);
      expect(r.json.error.code).toBe('store_unavailable');
      const unstored = await http(c.url, 'POST', '/v1/responses', { ...body, store: false }, auth);
      expect(unstored.status).toBe(200);
      expect(unstored.json.store).toBe(false);
    }
    await redis.restart();
    let r = await http(A.url, 'POST', '/v1/responses', body, auth);
    while (r.status === 503) r = await http(A.url, 'POST', '/v1/responses', body, auth);
    expect(r.status).toBe(200);
    expect((await client(B).responses.retrieve(r.json.id as string)).id).toBe(r.json.id);
  }, 60_000);
});
