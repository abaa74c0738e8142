import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { relevance } from './scoring-routes.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { post } from './testing/index.js';
import { tokenize } from './tokens.js';

const log = createLogger('sim-scoring', 'silent');
let sim: RunningSimulator;
let sglang: RunningSimulator;
beforeAll(async () => {
  [sim, sglang] = await Promise.all([
    startSimulator({ timeScale: 0 }, log),
    startSimulator({ timeScale: 0, engine: 'sglang' }, log),
  ]);
});
afterAll(async () => {
  await Promise.all([sim.close(), sglang.close()]);
});

const MODEL = 'motor-sim-7b';

describe('relevance', () => {
  it.each<[string, string, string, number]>([
    ['identical', 'red apple', 'red apple', 1],
    ['disjoint', 'red apple', 'blue sky', 0],
  ])('%s texts score %d', (_n, a, b, want) => {
    expect(relevance(tokenize(a), tokenize(b))).toBe(want);
  });
  it('a document sharing more of the query scores higher', () => {
    const q = tokenize('the red apple tree');
    expect(relevance(q, tokenize('the red apple'))).toBeGreaterThan(relevance(q, tokenize('the sky')));
  });
});

describe('POST /rerank, /v1/rerank, /v2/rerank (vLLM RerankResponse)', () => {
  const documents = ['blue sky', 'the red apple', 'red apple tree'];
  it.each(['/rerank', '/v1/rerank', '/v2/rerank'])('%s: results by score, highest first', async (path) => {
    const r = await post(sim.url, path, { model: MODEL, query: 'red apple tree', documents });
    expect(r.status).toBe(200);
    expect(r.json.id).toMatch(/^rerank-[0-9a-f]{32}$/);
    expect(r.json.model).toBe(MODEL);
    const results = r.json.results as Array<{ index: number; document: unknown; relevance_score: number }>;
    expect(results.map((x) => x.index)).toEqual([2, 1, 0]);
    expect(results[0]).toEqual({
      index: 2,
      document: { text: 'red apple tree', multi_modal: null },
      relevance_score: 1,
    });
    expect(r.json.usage.total_tokens).toBe(r.json.usage.prompt_tokens);
    expect(Object.keys(r.json.usage).sort()).toEqual(['prompt_tokens', 'total_tokens']);
  });
  it('top_n cuts the ranked list', async () => {
    const r = await post(sim.url, '/rerank', { query: 'red apple', documents, top_n: 1 });
    expect((r.json.results as unknown[]).length).toBe(1);
    expect(r.json.results[0].index).not.toBe(0);
  });
  it.each<[string, Record<string, unknown>, number, string | null]>([
    ['no query', { documents }, 400, 'query'],
    ['documents not text', { query: 'a', documents: [1] }, 400, 'documents'],
    ['negative top_n', { query: 'a', documents, top_n: -1 }, 400, 'top_n'],
    ['another model', { model: 'x', query: 'a', documents }, 404, 'model'],
  ])('%s → %d', async (_n, body, status, param) => {
    const r = await post(sim.url, '/rerank', body);
    expect(r.status).toBe(status);
    expect(r.json.error.param).toBe(param);
  });
});

describe('POST /score, /v1/score (vLLM ScoreResponse)', () => {
  it.each<[string, Record<string, unknown>, number[]]>([
    ['text_1 broadcast over text_2', { text_1: 'red apple', text_2: ['red apple', 'blue sky'] }, [1, 0]],
    ['pairs by position', { text_1: ['a b', 'c d'], text_2: ['a b', 'x y'] }, [1, 0]],
    ['queries/documents form', { queries: 'red apple', documents: 'red apple' }, [1]],
    ['data_1/data_2 form', { data_1: 'a', data_2: ['b'] }, [0]],
  ])('%s', async (_n, body, scores) => {
    for (const path of ['/score', '/v1/score']) {
      const r = await post(sim.url, path, { model: MODEL, ...body });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ object: 'list', model: MODEL, usage: { completion_tokens: 0 } });
      expect(r.json.id).toMatch(/^score-[0-9a-f]{32}$/);
      expect(r.json.data).toEqual(scores.map((score, index) => ({ index, object: 'score', score })));
    }
  });
  it.each<[string, Record<string, unknown>]>([
    ['no pair fields', { text_1: 'a' }],
    ['unequal lists', { text_1: ['a', 'b'], text_2: ['a', 'b', 'c'] }],
  ])('%s → 400', async (_n, body) => {
    expect((await post(sim.url, '/score', body)).status).toBe(400);
  });
});

describe('POST /pooling (vLLM PoolingResponse)', () => {
  it('one vector per input, the embedding of the same input', async () => {
    const [p, e] = await Promise.all([
      post(sim.url, '/pooling', { model: MODEL, input: ['x y', 'z'], dimensions: 8 }),
      post(sim.url, '/v1/embeddings', { model: MODEL, input: ['x y', 'z'], dimensions: 8 }),
    ]);
    expect(p.status).toBe(200);
    expect(p.json.id).toMatch(/^pool-[0-9a-f]{32}$/);
    expect(p.json).toMatchObject({ object: 'list', model: MODEL, usage: e.json.usage });
    const data = p.json.data as Array<{ index: number; object: string; data: number[] }>;
    expect(data.map((d) => [d.index, d.object])).toEqual([
      [0, 'pooling'],
      [1, 'pooling'],
    ]);
    expect(data.map((d) => d.data)).toEqual(
      (e.json.data as Array<{ embedding: number[] }>).map((d) => d.embedding),
    );
  });
  it('the chat form is refused', async () => {
    const r = await post(sim.url, '/pooling', { messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(400);
  });
});

describe('POST /detokenize (vLLM DetokenizeResponse)', () => {
  it('the inverse of /tokenize', async () => {
    const t = await post(sim.url, '/tokenize', { model: MODEL, prompt: 'Hello, world' });
    const d = await post(sim.url, '/detokenize', { model: MODEL, tokens: t.json.tokens });
    expect(d.status).toBe(200);
    expect(d.json).toEqual({ prompt: 'Hello, world' });
  });
  it.each<[string, unknown]>([
    ['not a list', 'abc'],
    ['a negative id', [-1]],
    ['an id outside the vocabulary', [10_000_000]],
  ])('%s → 400', async (_n, tokens) => {
    const r = await post(sim.url, '/detokenize', { tokens });
    expect(r.status).toBe(400);
  });
});

describe('an SGLang simulator', () => {
  it.each(['/detokenize', '/rerank', '/v1/score', '/pooling'])(
    '%s → 404 (vLLM-only routes)',
    async (path) => {
      expect((await post(sglang.url, path, { model: MODEL })).status).toBe(404);
    },
  );
});
