import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply, type LegCall } from '../testing/dispatch-harness.js';
import { wordsEngine, type Death } from '../testing/words-engine.js';

/**
 * Non-stream requests through streamed legs (`migration.nonStreamLegs: stream`, issue 16): the
 * client's JSON answer is assembled by Motor and equals, byte for byte, the engine's own non-stream
 * answer — uninterrupted, or continued after its leg died mid-answer.
 */

const UNION = (id: string) => ({ id, url: `http://${id.toLowerCase()}.test:3`, role: 'union' });

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

/** Two union instances; the first leg dies (as `death` says) after 3 tokens, or every leg after `every`. */
function harness(death: Death | null, opts: { config?: object; every?: number } = {}) {
  let legs = 0;
  const engine = (call: LegCall): EngineReply =>
    opts.every !== undefined
      ? wordsEngine(call, death, opts.every)
      : wordsEngine(call, ++legs === 1 ? death : null, 3);
  const h = new DispatchHarness(
    {
      instances: [UNION('A'), UNION('B')],
      timeouts: { idleMs: 100 },
      migration: { nonStreamLegs: 'stream' }, // (the harness's default is json)
      ...opts.config,
    },
    { A: engine, B: engine },
  );
  harnesses.push(h);
  return h;
}

const JSON_LEGS = { migration: { nonStreamLegs: 'json' } };

/** The engine's own non-stream answer (a JSON leg, nothing fails). */
async function reference(body: Record<string, unknown> = {}): Promise<string> {
  const r = (await harness(null, { config: JSON_LEGS }).send(body))!;
  expect(r.status).toBe(200);
  expect(r.headers['content-type']).toBe('application/json');
  return r.text;
}

describe('non-stream answers assembled from streamed legs', () => {
  it('uninterrupted: the leg streams with usage, the answer is the engine’s own JSON, byte for byte', async () => {
    const want = await reference();
    const h = harness(null);
    const r = (await h.send({}))!;
    expect(r.text).toBe(want);
    expect(r.headers['content-type']).toBe('application/json');
    expect(h.calls[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it.each<Death>(['reset', 'truncate', 'recomputed', 'idle'])(
    'the leg dies mid-answer (%s) → continued elsewhere, byte-equal to an uninterrupted answer',
    async (death) => {
      const want = await reference();
      const h = harness(death);
      const r = (await h.send({}))!;
      expect(r.status).toBe(200);
      expect(r.text).toBe(want);
      expect(h.calls).toHaveLength(2);
      expect(h.calls[1]!.body).toMatchObject({ continue_final_message: true, stream: true });
      expect(h.observed('migration')).toContainEqual([expect.any(String), 'resumed']);
      expect(h.observed('retry')).toEqual([]); // a migration, not a retry from the start
    },
  );

  it('every leg dies after 3 tokens → still the whole answer (JSON legs: an error after the retries)', async () => {
    const want = await reference({ max_tokens: 8 });
    const h = harness('reset', { every: 3 });
    expect((await h.send({ max_tokens: 8 }))!.text).toBe(want);
    expect(h.calls.map((c) => c.body.max_tokens)).toEqual([8, 5, 2]);
    const old = harness('reset', { every: 3, config: JSON_LEGS });
    expect((await old.send({ max_tokens: 8 }))!.status).toBeGreaterThanOrEqual(500);
  });

  it('every leg dies after 2 tokens → a clear JSON error after migration.maxPerRequest', async () => {
    const h = harness('reset', { every: 2 });
    const r = (await h.send({}))!;
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(JSON.parse(r.text).error.message).toMatch(/not migrated: 2 migration\(s\) already/);
    expect(h.calls).toHaveLength(3);
  });

  it.each([
    ['n > 1', { n: 2 }, {}],
    ['migration off', {}, { migration: { maxPerRequest: 0, nonStreamLegs: 'stream' } }],
    ['nonStreamLegs json', {}, JSON_LEGS],
  ])('%s → the leg is sent as the client sent it', async (_name, body, config) => {
    const h = harness(null, { config });
    await h.send(body);
    expect(h.calls[0]!.body.stream).toBeUndefined();
  });

  it('an engine answering the streamed leg with one JSON body: that body is relayed as it is', async () => {
    const body = { id: 'x', object: 'chat.completion', choices: [], usage: null };
    const h = new DispatchHarness(
      { instances: [UNION('A')], migration: { nonStreamLegs: 'stream' } },
      { A: () => ({ kind: 'json', body }) },
    );
    harnesses.push(h);
    const r = (await h.send({}))!;
    expect(h.calls[0]!.body.stream).toBe(true);
    expect([r.status, JSON.parse(r.text)]).toEqual([200, body]);
  });
});
