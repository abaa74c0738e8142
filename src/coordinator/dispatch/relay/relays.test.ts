import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply } from '../testing/dispatch-harness.js';

/** The stream and JSON relays (and the watchdogs around them) on a single instance, in process. */

const U = [{ id: 'D', url: 'http://u.test:3', role: 'union' }];
const frame = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
const delta = (content: string) => ({ id: 'c', choices: [{ index: 0, delta: { content } }] });
const DONE = 'data: [DONE]\n\n';

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

function harness(reply: EngineReply, config: Record<string, unknown> = {}): DispatchHarness {
  const h = new DispatchHarness({ retry: { maxAttempts: 1 }, ...config, instances: U }, { D: () => reply });
  harnesses.push(h);
  return h;
}

describe('stream relay', () => {
  // columns: engine reply, coordinator config, client body fields, client text, attempt failure
  it.each<[string, EngineReply, Record<string, unknown>, object, string, string | null]>([
    [
      'frames pass through; the engine [DONE] becomes ours',
      { kind: 'sse', frames: [JSON.stringify(delta('a')), JSON.stringify(delta('b'))] },
      {},
      {},
      frame(delta('a')) + frame(delta('b')) + DONE,
      null,
    ],
    [
      'internal keys and unrequested token ids are dropped',
      {
        kind: 'sse',
        frames: [
          JSON.stringify({ ...delta('a'), _motor_x: 1, kv_transfer_params: null, prompt_token_ids: [1] }),
        ],
      },
      {},
      {},
      frame(delta('a')) + DONE,
      null,
    ],
    [
      'token ids the client asked for are kept',
      { kind: 'sse', frames: [JSON.stringify({ id: 'c', choices: [{ index: 0, token_ids: [7] }] })] },
      {},
      { return_token_ids: true },
      frame({ id: 'c', choices: [{ index: 0, token_ids: [7] }] }) + DONE,
      null,
    ],
    [
      "the engine's error frame is relayed once, then [DONE]",
      { kind: 'sse', frames: [JSON.stringify(delta('a')), '{"error":{"message":"oom"}}'], end: 'truncate' },
      {},
      {},
      frame(delta('a')) + 'data: {"error":{"message":"oom"}}\n\n' + DONE,
      'engine_error',
    ],
    [
      'idle timeout after commit, migration off → our error frame, [DONE]',
      { kind: 'sse', frames: [JSON.stringify(delta('a'))], end: 'hang' },
      { timeouts: { idleMs: 40 }, migration: { maxPerRequest: 0 } },
      {},
      frame(delta('a')) +
        frame({
          error: {
            message: 'no stream data for 40 ms',
            type: 'server_error',
            param: null,
            code: 'idle_timeout',
          },
        }) +
        DONE,
      'idle_timeout',
    ],
  ])('%s', async (_name, reply, config, body, text, failure) => {
    const h = harness(reply, config);
    const res = await h.send({ stream: true, ...body });
    expect(res?.status).toBe(200);
    expect(res?.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res?.text).toBe(text);
    // after commit the attempt fails, but the request counts as delivered
    expect(h.observed('attemptFailed').at(-1)?.[0] ?? null).toBe(failure);
    expect(h.observed('end').at(-1)?.[1]).toBe(null);
  });

  it('no first byte in time → 504 before commit', async () => {
    const h = harness({ kind: 'hang' }, { timeouts: { firstTokenMs: 40 } });
    const res = await h.send({ stream: true });
    expect(res?.status).toBe(504);
    expect(JSON.parse(res!.text).error.code).toBe('first_token_timeout');
    expect(h.observed('attemptFailed')).toEqual([['first_token_timeout', 'timeout']]);
  });
});

describe('JSON relay', () => {
  it.each<[string, string, string, number, string]>([
    [
      "the engine's bytes and content type as they are",
      '{"id":"c",  "choices":[]}',
      'application/json; charset=utf-8',
      200,
      '{"id":"c",  "choices":[]}',
    ],
    [
      "vLLM's trailing null kv_transfer_params is cut without a parse",
      '{"id":"c", "choices":[],"kv_transfer_params":null}\n',
      'application/json',
      200,
      '{"id":"c", "choices":[]}',
    ],
    [
      'internal keys and token ids are rewritten out',
      '{"id":"c","_motor_x":1,"choices":[{"index":0,"token_ids":[1]}],"kv_transfer_params":{"a":1}}',
      'application/json',
      200,
      '{"id":"c","choices":[{"index":0}]}',
    ],
    [
      'a body to rewrite that is not JSON → 502',
      '{"_motor_x": nope',
      'application/json',
      502,
      'an engine answered something the coordinator could not read',
    ],
  ])('%s', async (_name, engineBody, contentType, status, text) => {
    const h = harness({ kind: 'json', body: engineBody, contentType });
    const res = await h.send({ stream: false });
    expect(res?.status).toBe(status);
    if (status === 200) {
      expect(res?.text).toBe(text);
      expect(res?.headers['content-type']).toBe(contentType);
    } else {
      expect(JSON.parse(res!.text).error).toMatchObject({ code: 'protocol_error' });
      expect(res?.text).toContain(text);
    }
  });
});
