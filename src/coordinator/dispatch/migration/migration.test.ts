import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply, type LegCall } from '../testing/dispatch-harness.js';
import { proxyPrefillReply } from '../testing/engine-replies.js';
import { ANSWER, WORDS, wordsEngine, type Death } from '../testing/words-engine.js';

/**
 * In-flight migration (issue 16) through the dispatch harness: engines whose answer is a function of
 * the context (the words after a partial assistant message are the rest of the same answer), failing
 * after commit in every way a new attempt can fix.
 */

const UNION = (id: string) => ({ id, url: `http://${id.toLowerCase()}.test:3`, role: 'union' });

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

/** Two union instances; the first leg dies (as `death` says) after 3 tokens (or after `dieAfter` every leg). */
function harness(death: Death | null, opts: { config?: object; everyLegDiesAfter?: number } = {}) {
  let legs = 0;
  const every = opts.everyLegDiesAfter;
  const engine = (call: LegCall): EngineReply =>
    every !== undefined ? wordsEngine(call, death, every) : wordsEngine(call, ++legs === 1 ? death : null, 3);
  const h = new DispatchHarness(
    { instances: [UNION('A'), UNION('B')], timeouts: { idleMs: 100 }, ...opts.config },
    { A: engine, B: engine },
  );
  harnesses.push(h);
  return h;
}

interface Parsed {
  content: string;
  ids: Set<string>;
  created: Set<number>;
  roles: number;
  finish: string[];
  usage: Record<string, number> | null;
  errors: string[];
  done: boolean;
}

function parse(text: string): Parsed {
  const p: Parsed = {
    content: '',
    ids: new Set(),
    created: new Set(),
    roles: 0,
    finish: [],
    usage: null,
    errors: [],
    done: false,
  };
  for (const frame of text.split('\n\n')) {
    if (!frame.startsWith('data: ')) continue;
    if (frame === 'data: [DONE]') {
      p.done = true;
      continue;
    }
    const o = JSON.parse(frame.slice(6));
    if (o.error) {
      p.errors.push(o.error.message);
      continue;
    }
    p.ids.add(o.id);
    p.created.add(o.created);
    if (o.usage) p.usage = o.usage;
    for (const c of o.choices) {
      if (c.delta?.role) p.roles++;
      if (typeof c.delta?.content === 'string') p.content += c.delta.content;
      if (c.finish_reason) p.finish.push(c.finish_reason);
    }
  }
  return p;
}

const BODY = { stream: true, stream_options: { include_usage: true } };

describe('in-flight migration of a committed stream', () => {
  it('the uninterrupted answer, for reference', async () => {
    const r = parse((await harness(null).send(BODY))!.text);
    expect(r.content).toBe(ANSWER);
    expect(r.usage).toEqual({ prompt_tokens: 5, completion_tokens: 8, total_tokens: 13 });
  });

  it.each<Death>(['reset', 'truncate', 'recomputed', 'idle'])(
    'the leg fails after 3 tokens (%s) → the client gets exactly the uninterrupted answer',
    async (death) => {
      const h = harness(death);
      const reply = await h.send(BODY);
      expect(reply!.status).toBe(200);
      const r = parse(reply!.text);
      expect(r.errors).toEqual([]);
      expect(r.content).toBe(ANSWER);
      expect(r.roles).toBe(1); // the role frame is not repeated
      expect(r.ids.size).toBe(1); // one response id, the first leg's
      expect(r.created.size).toBe(1);
      expect(r.finish).toEqual(['stop']);
      expect(r.usage).toEqual({ prompt_tokens: 5, completion_tokens: 8, total_tokens: 13 });
      expect(r.done).toBe(true);
      expect(h.calls).toHaveLength(2);
      const cont = h.calls[1]!.body;
      expect(cont.continue_final_message).toBe(true);
      expect(cont.add_generation_prompt).toBe(false);
      expect((cont.messages as unknown[]).at(-1)).toEqual({ role: 'assistant', content: 'Once upon a' });
      expect(h.calls[0]!.aborted).toBe(true); // the failed leg is stopped
      expect(h.observed('migration')).toContainEqual([expect.any(String), 'started']);
      expect(h.observed('migration')).toContainEqual([expect.any(String), 'resumed']);
    },
  );

  it('max_tokens, max_completion_tokens and min_tokens are reduced by what was sent', async () => {
    const h = harness('reset');
    const r = parse(
      (await h.send({ ...BODY, max_tokens: 6, max_completion_tokens: 6, min_tokens: 4 }))!.text,
    );
    expect(r.content).toBe(WORDS.slice(0, 6).join(''));
    expect(r.finish).toEqual(['length']);
    expect(h.calls[1]!.body).toMatchObject({ max_tokens: 3, max_completion_tokens: 3, min_tokens: 1 });
    expect(r.usage?.completion_tokens).toBe(6);
  });

  it('every leg dies → a clear error frame after migration.maxPerRequest migrations', async () => {
    const h = harness('reset', { everyLegDiesAfter: 2 });
    const reply = await h.send(BODY);
    const r = parse(reply!.text);
    expect(h.calls).toHaveLength(3); // the first attempt + 2 migrations
    expect(r.content).toBe(WORDS.slice(0, 6).join('')); // 2 tokens per leg, none repeated
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/not migrated: 2 migration\(s\) already \(migration\.maxPerRequest\)/);
    expect(r.done).toBe(true);
    expect(h.observed('migration').at(-1)).toEqual(['connection_error', 'exhausted']);
  });

  it.each([
    ['n > 1', { n: 2 }, /not migrated: the request has n > 1/],
    ['structured output', { response_format: { type: 'json_object' } }, /the request has response_format/],
    ['tools', { tools: [{ type: 'function', function: { name: 'f' } }] }, /the request has tools/],
  ])('%s → refused with the reason in the error frame', async (_n, extra, reason) => {
    const h = harness('reset');
    const r = parse((await h.send({ ...BODY, ...extra }))!.text);
    expect(h.calls).toHaveLength(1);
    expect(r.content).toBe('Once upon a');
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(reason);
    expect(h.observed('migration')).toEqual([['connection_error', 'refused']]);
  });

  it('a client that has gone is never migrated', async () => {
    const h = harness('idle', { everyLegDiesAfter: 3 });
    expect(await h.send(BODY, 'A')).toBeNull(); // the client leaves once the first leg is sent
    expect(h.calls).toHaveLength(1);
    expect(h.calls[0]!.aborted).toBe(true);
    expect(h.observed('migration')).toEqual([]);
    expect(h.observed('attemptFailed')[0]?.[0]).toBe('client_disconnect');
  });

  it('migration.maxPerRequest 0 → the stream ends with the failure as before', async () => {
    const h = harness('reset', { config: { migration: { maxPerRequest: 0 } } });
    const r = parse((await h.send(BODY))!.text);
    expect(h.calls).toHaveLength(1);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).not.toMatch(/migrat/);
    expect(h.observed('migration')).toEqual([]);
  });

  it('a handoff (P/D) stream continues on a new pair, prefill included', async () => {
    let decodes = 0;
    const h = new DispatchHarness(
      {
        instances: [
          { id: 'P', url: 'http://p.test:1', role: 'prefill', dispatchProfile: 'handoff' },
          { id: 'D1', url: 'http://d1.test:2', role: 'decode', dispatchProfile: 'handoff' },
          { id: 'D2', url: 'http://d2.test:2', role: 'decode', dispatchProfile: 'handoff' },
        ],
      },
      {
        P: (call) => proxyPrefillReply(call, { handoff_mode: 'handoff', payload: { remote_engine_id: 'p' } }),
        D1: (call) => wordsEngine(call, ++decodes === 1 ? 'reset' : null, 3),
        D2: (call) => wordsEngine(call, ++decodes === 1 ? 'reset' : null, 3),
      },
    );
    harnesses.push(h);
    const r = parse((await h.send(BODY))!.text);
    expect(r.content).toBe(ANSWER);
    expect(r.errors).toEqual([]);
    expect(h.callsTo('P')).toHaveLength(2);
    const [first, second] = h.calls.filter((c) => c.instanceId !== 'P');
    expect(second!.instanceId).not.toBe(first!.instanceId); // the failed decode is excluded
  });
});
