import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { createLogger } from '../common/logger.js';
import { defaultSimOptions } from './options.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { parseGenerateRequest, splitGenerateBatch } from './sglang-generate.js';
import { http, idleLedger, post } from './testing/index.js';

const log = createLogger('test', 'silent');

describe('parseGenerateRequest / splitGenerateBatch', () => {
  const opts = defaultSimOptions();
  it('maps sampling_params onto the simulator request', () => {
    const g = parseGenerateRequest(
      {
        input_ids: [1, 2, 3],
        sampling_params: { max_new_tokens: 7, min_new_tokens: 2, stop: ['x'] },
        rid: 'r',
      },
      opts,
    );
    expect(g).toMatchObject({
      kind: 'generate',
      promptIds: [1, 2, 3],
      maxTokens: 7,
      minTokens: 2,
      bodyRequestId: 'r',
    });
    expect(g.stop).toEqual(new Set(['x']));
  });

  it.each([
    [{}, /either 'text' or 'input_ids'/],
    [{ text: 'a', sampling_params: 3 }, /sampling_params/],
    [{ text: 'a', bootstrap_room: 1, bootstrap_host: 'h', bootstrap_port: 'x' }, /bootstrap_port/],
  ])('%j → 400', (body, message) => {
    expect(() => parseGenerateRequest(body, opts)).toThrow(message);
  });

  it('splits the batch fixture one entry per prompt', () => {
    const parts = splitGenerateBatch(fixtureBody('sglang/mini-lb/generate-request.batch.json'));
    expect(parts.map((p) => [p.text, p.bootstrap_port])).toEqual([
      ['Hello', 8998],
      ['Bye', 8998],
    ]);
  });

  it.each([
    // SGLang io_struct.py GenerateReqInput: a scalar room on a batch is room + i per prompt
    [7, ['7', '8', '9']],
    ['9223372036854775800', ['9223372036854775800', '9223372036854775801', '9223372036854775802']],
    [
      [5, 3, 1],
      [5, 3, 1],
    ],
  ])('fans a scalar bootstrap_room %o out per prompt', (room, rooms) => {
    const parts = splitGenerateBatch({ text: ['a', 'b', 'c'], bootstrap_room: room });
    expect(parts.map((p) => p.bootstrap_room)).toEqual(rooms);
  });

  it('refuses a per-prompt list of the wrong length', () => {
    expect(() => splitGenerateBatch({ text: ['a', 'b'], rid: ['only-one'] })).toThrow(
      /'rid' must have one entry per prompt/,
    );
  });
});

describe('SGLang /generate and /abort_request on the wire', () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ port: 0, engine: 'sglang', timeScale: 0 }, log);
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('non-stream /generate: native body, rid is the id', async () => {
    const r = await post(sim.url, '/generate', {
      text: 'Hello',
      sampling_params: { max_new_tokens: 3 },
      rid: 'g-1',
    });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      meta_info: { id: 'g-1', finish_reason: { type: 'length', length: 3 }, completion_tokens: 3 },
    });
    expect(r.json.output_ids).toHaveLength(3);
    expect(typeof r.json.text).toBe('string');
  });

  it('a streaming batch is refused clearly', async () => {
    const r = await post(sim.url, '/generate', { text: ['a', 'b'], stream: true });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/streaming batched \/generate/);
  });

  it('POST /abort_request {rid, abort_all} answers 200 with an empty body and aborts', async () => {
    const slow = await startSimulator({ port: 0, engine: 'sglang', timeScale: 1, itlMs: 2 }, log);
    try {
      const res = await request(`${slow.url}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          text: 'abort me',
          stream: true,
          rid: 'ab-1',
          sampling_params: { max_new_tokens: 5000 },
        }),
      });
      const it = res.body[Symbol.asyncIterator]();
      await it.next(); // streaming has begun
      const a = await post(slow.url, '/abort_request', {
        ...fixtureBody('sglang/server/abort-request.json'),
        rid: 'ab-1',
      });
      expect(a.status).toBe(200);
      expect(a.text).toBe('');
      let rest = '';
      for (let c = await it.next(); !c.done; c = await it.next()) rest += String(c.value);
      expect(rest).toMatch(/"finish_reason":\{"type":"abort"/);
      expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
      const l = await idleLedger(slow.url);
      expect(l.finished.find((f) => f.id === 'ab-1')).toMatchObject({
        outcome: 'aborted',
        reason: 'abort_request',
      });
      // unknown rid and abort_all: still 200, empty
      for (const body of [{ rid: 'nobody' }, { abort_all: true }, {}]) {
        const r = await post(slow.url, '/abort_request', body);
        expect([r.status, r.text]).toEqual([200, '']);
      }
    } finally {
      await slow.close();
    }
  });

  it('a vLLM simulator has neither /generate nor /abort_request', async () => {
    const v = await startSimulator({ port: 0, timeScale: 0 }, log);
    try {
      expect((await post(v.url, '/generate', { text: 'x' })).status).toBe(404);
      expect((await post(v.url, '/abort_request', { rid: 'x' })).status).toBe(404);
    } finally {
      await v.close();
    }
  });

  it('GET /server_info is not recorded (polled by discovery)', async () => {
    await http(sim.url, 'DELETE', '/debug/recorded');
    await http(sim.url, 'GET', '/server_info');
    expect((await http(sim.url, 'GET', '/debug/recorded')).json).toEqual([]);
  });
});
