import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { DEFAULT_EMBEDDING_DIMENSIONS } from './embeddings-route.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { post } from './testing/index.js';

const log = createLogger('sim-embeddings', 'silent');
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timeScale: 0 }, log);
});
afterAll(async () => {
  await sim.close();
});

const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('POST /v1/embeddings', () => {
  it.each<[string, unknown, number]>([
    ['a string', 'hello world', 1],
    ['a list of strings', ['a', 'b', 'c'], 3],
    ['token ids', [15339, 1917], 1],
    ['lists of token ids', [[15339], [1917, 15339]], 2],
  ])('%s → one unit vector per input, vLLM shape', async (_name, input, count) => {
    const r = await post(sim.url, '/v1/embeddings', { model: 'motor-sim-7b', input });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      object: 'list',
      model: 'motor-sim-7b',
      usage: { completion_tokens: 0, prompt_tokens_details: null },
    });
    expect(r.json.id).toMatch(/^embd-[0-9a-f]{32}$/);
    expect(r.json.data).toHaveLength(count);
    for (const [i, d] of (
      r.json.data as Array<{ index: number; object: string; embedding: number[] }>
    ).entries()) {
      expect(d).toMatchObject({ index: i, object: 'embedding' });
      expect(d.embedding).toHaveLength(DEFAULT_EMBEDDING_DIMENSIONS);
      expect(norm(d.embedding)).toBeCloseTo(1, 5);
    }
    expect(r.json.usage.total_tokens).toBe(r.json.usage.prompt_tokens);
  });

  it('deterministic: equal inputs embed equally, different ones differently; dimensions honoured', async () => {
    const r = await post(sim.url, '/v1/embeddings', {
      model: 'motor-sim-7b',
      input: ['x y', 'x y', 'z'],
      dimensions: 8,
    });
    const [a, b, c] = (r.json.data as Array<{ embedding: number[] }>).map((d) => d.embedding);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    expect(a).toHaveLength(8);
  });

  it('base64: float32 little-endian of the float vector', async () => {
    const body = { model: 'motor-sim-7b', input: 'hello', dimensions: 4 };
    const [f, b] = await Promise.all([
      post(sim.url, '/v1/embeddings', body),
      post(sim.url, '/v1/embeddings', { ...body, encoding_format: 'base64' }),
    ]);
    const buf = Buffer.from(b.json.data[0].embedding as string, 'base64');
    const decoded = Array.from({ length: 4 }, (_, i) => buf.readFloatLE(i * 4));
    expect(decoded).toEqual(f.json.data[0].embedding);
  });

  it.each<[string, Record<string, unknown>, number]>([
    ['an empty input', { input: '' }, 400],
    ['a bad encoding_format', { input: 'x', encoding_format: 'hex' }, 400],
    ['an unknown model', { input: 'x', model: 'other' }, 404],
  ])('%s → %d', async (_name, extra, status) => {
    expect((await post(sim.url, '/v1/embeddings', { model: 'motor-sim-7b', ...extra })).status).toBe(status);
  });
});
