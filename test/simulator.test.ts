import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { connect } from 'node:net';
import { request } from 'undici';
import { startMotor, type MotorProcess } from './helpers/motor-process.js';
import { chatBody, http, idleLedger, post, sseEvents } from '../src/simulator/testing/index.js';

let sim: MotorProcess;
beforeAll(async () => {
  sim = await startMotor([
    'sim',
    '--time-scale',
    '0',
    '--port',
    '0',
    '--block-size',
    '4',
    '--kv-blocks',
    '64',
  ]);
});
afterAll(async () => {
  await sim?.stop();
});

describe('motor sim: OpenAI API (union, time-scale 0)', () => {
  it('non-stream chat is deterministic, with usage and finish_reason', async () => {
    const body = chatBody('Hello there, simulator!', { max_tokens: 6 });
    const a = await post(sim.url, '/v1/chat/completions', body);
    const b = await post(sim.url, '/v1/chat/completions', body);
    expect(a.status).toBe(200);
    expect(a.json.object).toBe('chat.completion');
    expect(a.json.choices[0].message.role).toBe('assistant');
    expect(a.json.choices[0].finish_reason).toBe('length');
    expect(a.json.usage.completion_tokens).toBe(6);
    expect(a.json.usage.prompt_tokens).toBeGreaterThan(5);
    expect(a.json.choices[0].message.content).toBe(b.json.choices[0].message.content);
    expect(a.json.choices[0].message.content.split(' ').length).toBe(7); // leading space + 6 words
    expect(a.json.kv_transfer_params).toBeNull();
    expect(a.json).not.toHaveProperty('prompt_token_ids');
  });

  it('exact output for a fixed seed, and seed changes the text', async () => {
    const r1 = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
      seed: 7,
    });
    // output = f(seed, context) (issue 16): the same seed and prompt repeat it, another prompt changes it
    const r2 = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
      seed: 7,
    });
    const r4 = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'y',
      max_tokens: 4,
      seed: 7,
    });
    const r3 = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
      seed: 8,
    });
    expect(r1.json.object).toBe('text_completion');
    expect(r1.json.choices[0].text).toBe(r2.json.choices[0].text);
    expect(r1.json.choices[0].text).not.toBe(r3.json.choices[0].text);
    expect(r1.json.choices[0].text).not.toBe(r4.json.choices[0].text);
    expect(r1.json.choices[0].text).toMatchInlineSnapshot(`" have island before have"`);
  });

  it('no max_tokens → default length (16) with finish_reason stop', async () => {
    const r = await post(sim.url, '/v1/chat/completions', chatBody('default length'));
    expect(r.json.usage.completion_tokens).toBe(16);
    expect(r.json.choices[0].finish_reason).toBe('stop');
  });

  it('max_completion_tokens wins over max_tokens', async () => {
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chatBody('mct', { max_tokens: 9, max_completion_tokens: 3 }),
    );
    expect(r.json.usage.completion_tokens).toBe(3);
  });

  it('stream framing matches vLLM: role chunk, content chunks, finish, usage chunk, [DONE]', async () => {
    const nonStream = await post(sim.url, '/v1/chat/completions', chatBody('stream me', { max_tokens: 5 }));
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chatBody('stream me', { max_tokens: 5, stream: true, stream_options: { include_usage: true } }),
    );
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/event-stream/);
    const ev = sseEvents(r.text) as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(ev.at(-1)).toBe('[DONE]');
    expect(ev[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const content = ev.slice(1, 6);
    expect(content.every((c) => c.object === 'chat.completion.chunk' && c.id === ev[0].id)).toBe(true);
    expect(content.map((c) => c.choices[0].delta.content).join('')).toBe(
      nonStream.json.choices[0].message.content,
    );
    expect(content.slice(0, 4).every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(content[4].choices[0].finish_reason).toBe('length');
    expect(ev[6].choices).toEqual([]);
    expect(ev[6].usage).toMatchObject({
      prompt_tokens: nonStream.json.usage.prompt_tokens,
      completion_tokens: 5,
    });
    expect(ev).toHaveLength(8);
  });

  it('completions stream without include_usage has no usage chunk', async () => {
    const r = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'p',
      max_tokens: 3,
      stream: true,
    });
    const ev = sseEvents(r.text) as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(ev).toHaveLength(4);
    expect(ev[0].object).toBe('text_completion');
    expect(ev[2].choices[0].finish_reason).toBe('length');
    expect(ev.some((e) => typeof e === 'object' && 'usage' in e)).toBe(false);
  });

  it('return_token_ids adds prompt_token_ids and token_ids only when asked', async () => {
    const r = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: [1, 2, 3, 4, 5],
      max_tokens: 3,
      return_token_ids: true,
    });
    expect(r.json.choices[0].prompt_token_ids).toEqual([1, 2, 3, 4, 5]);
    expect(r.json.choices[0].token_ids).toHaveLength(3);
    const c = await post(
      sim.url,
      '/v1/chat/completions',
      chatBody('ids', { max_tokens: 2, return_token_ids: true }),
    );
    expect(c.json.prompt_token_ids.length).toBe(c.json.usage.prompt_tokens);
    expect(c.json.choices[0].token_ids).toHaveLength(2);
  });

  it('stop word ends output early with finish_reason stop', async () => {
    const full = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
      seed: 7,
    });
    const words = (full.json.choices[0].text as string).trim().split(' ');
    const r = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'x',
      max_tokens: 4,
      seed: 7,
      stop: [words[2]],
    });
    expect(r.json.choices[0].finish_reason).toBe('stop');
    expect(r.json.choices[0].text).toBe(' ' + words.slice(0, 2).join(' '));
  });

  it('request id: X-Request-Id header wins, echoed, used for the response id', async () => {
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chatBody('id', { max_tokens: 1, request_id: 'body-1' }),
      {
        'x-request-id': 'hdr-1',
      },
    );
    expect(r.headers['x-request-id']).toBe('hdr-1');
    expect(r.json.id).toBe('chatcmpl-hdr-1');
    const b = await post(sim.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'a',
      max_tokens: 1,
      request_id: 'body-2',
    });
    expect(b.json.id).toBe('cmpl-body-2');
    expect(b.headers['x-request-id']).toBe('body-2');
  });

  it('prefix cache: the second identical prompt reports cached tokens and metrics count hits', async () => {
    const prompt =
      'The prefix cache should remember this fairly long prompt across requests, block by block.';
    const a = await post(sim.url, '/v1/completions', { model: 'motor-sim-7b', prompt, max_tokens: 1 });
    const b = await post(sim.url, '/v1/completions', { model: 'motor-sim-7b', prompt, max_tokens: 1 });
    const n = a.json.usage.prompt_tokens as number;
    expect(a.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(b.json.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((n - 1) / 4) * 4);
    const m = await http(sim.url, 'GET', '/metrics');
    const hits = Number(/vllm:prefix_cache_hits_total\{model_name="motor-sim-7b"\} (\d+)/.exec(m.text)![1]);
    expect(hits).toBeGreaterThanOrEqual(b.json.usage.prompt_tokens_details.cached_tokens);
  });

  it('works with the openai client (stream and non-stream)', async () => {
    const client = new OpenAI({ baseURL: sim.url + '/v1', apiKey: 'x' });
    const r = await client.chat.completions.create({
      model: 'motor-sim-7b',
      messages: [{ role: 'user', content: 'openai client' }],
      max_tokens: 4,
    });
    let streamed = '';
    const s = await client.chat.completions.create({
      model: 'motor-sim-7b',
      messages: [{ role: 'user', content: 'openai client' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: unknown = null;
    for await (const chunk of s) {
      streamed += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(streamed).toBe(r.choices[0]!.message.content);
    expect(usage).toMatchObject({ completion_tokens: 4 });
  });

  it('GET /v1/models, /health, /metrics with vLLM metric names', async () => {
    const models = await http(sim.url, 'GET', '/v1/models');
    expect(models.json.data[0].id).toBe('motor-sim-7b');
    expect((await http(sim.url, 'GET', '/health')).status).toBe(200);
    const m = await http(sim.url, 'GET', '/metrics');
    for (const name of [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:prefix_cache_hits_total',
      'vllm:prefix_cache_queries_total',
      'vllm:time_to_first_token_seconds_bucket',
      'vllm:inter_token_latency_seconds_bucket',
      'vllm:e2e_request_latency_seconds_bucket',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
    ]) {
      expect(m.text).toContain(`${name}{`);
    }
    expect(m.text).toContain('model_name="motor-sim-7b"');
  });

  it.each([
    ['bad JSON', '/v1/chat/completions', '{"model":', 400, null],
    ['missing model', '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }, 400, 'model'],
    ['missing messages', '/v1/chat/completions', { model: 'motor-sim-7b' }, 400, 'messages'],
    ['missing prompt', '/v1/completions', { model: 'motor-sim-7b' }, 400, 'prompt'],
    [
      'max_tokens not int',
      '/v1/completions',
      { model: 'motor-sim-7b', prompt: 'x', max_tokens: 'a' },
      400,
      'max_tokens',
    ],
    [
      'stream not bool',
      '/v1/completions',
      { model: 'motor-sim-7b', prompt: 'x', stream: 'yes' },
      400,
      'stream',
    ],
    [
      'messages wrong type',
      '/v1/chat/completions',
      { model: 'motor-sim-7b', messages: 'hi' },
      400,
      'messages',
    ],
    ['unknown model', '/v1/completions', { model: 'nope', prompt: 'x' }, 404, 'model'],
    ['too long', '/v1/completions', { model: 'motor-sim-7b', prompt: 'x', max_tokens: 40000 }, 400, 'prompt'],
    ['unknown route', '/v1/nothing', {}, 404, null],
  ])('%s → %s OpenAI-style error', async (_name, path, body, status, param) => {
    const r = await post(sim.url, path, body);
    expect(r.status).toBe(status);
    expect(r.json.error).toMatchObject({ message: expect.any(String), type: expect.any(String) });
    expect(r.json.error.param).toBe(param);
  });

  it('oversized body → 413 and the process keeps serving', async () => {
    const big = await startMotor(['sim', '--time-scale', '0', '--max-body-bytes', '1000']);
    try {
      const r = await post(big.url, '/v1/completions', { model: 'motor-sim-7b', prompt: 'x'.repeat(5000) });
      expect(r.status).toBe(413);
      expect(r.json.error.message).toMatch(/exceeds 1000 bytes/);
      expect((await post(big.url, '/v1/completions', { model: 'motor-sim-7b', prompt: 'ok' })).status).toBe(
        200,
      );
    } finally {
      await big.stop();
    }
  });

  it('recorder returns bodies and headers; DELETE clears', async () => {
    await http(sim.url, 'DELETE', '/debug/recorded');
    await post(
      sim.url,
      '/v1/completions',
      { model: 'motor-sim-7b', prompt: 'rec', max_tokens: 1, extra: 1 },
      { 'x-trace': 't1' },
    );
    const r = await http(sim.url, 'GET', '/debug/recorded');
    expect(r.json).toHaveLength(1);
    expect(r.json[0]).toMatchObject({
      method: 'POST',
      path: '/v1/completions',
      body: { prompt: 'rec', extra: 1 },
      headers: { 'x-trace': 't1' },
    });
    await http(sim.url, 'DELETE', '/debug/recorded');
    expect((await http(sim.url, 'GET', '/debug/recorded')).json).toEqual([]);
  });

  it('ledger lists finished requests with outcome and nothing in flight', async () => {
    await post(
      sim.url,
      '/v1/completions',
      { model: 'motor-sim-7b', prompt: 'l', max_tokens: 2 },
      { 'x-request-id': 'led-1' },
    );
    const l = await idleLedger(sim.url);
    expect(l.in_flight).toEqual([]);
    expect(l.finished.find((f) => f.id === 'led-1')).toMatchObject({
      outcome: 'completed',
      output_tokens: 2,
      flow: 'plain',
    });
    expect(l.kv_held).toEqual([]);
  });
});

describe('motor sim: timing, queueing, abort', () => {
  let slow: MotorProcess;
  beforeAll(async () => {
    slow = await startMotor([
      'sim',
      '--time-scale',
      '1',
      '--itl-ms',
      '2',
      '--prefill-overhead-ms',
      '1',
      '--max-num-seqs',
      '1',
    ]);
  });
  afterAll(async () => {
    await slow?.stop();
  });

  it('TTFT and ITL follow the timing model', async () => {
    const t0 = performance.now();
    const r = await post(slow.url, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: 'time',
      max_tokens: 20,
    });
    const ms = performance.now() - t0;
    expect(r.status).toBe(200);
    expect(ms).toBeGreaterThanOrEqual(19 * 2 * 0.9); // 19 decode steps of 2 ms
    expect(ms).toBeLessThan(2000);
  });

  it('max-num-seqs: a second request waits FIFO; closing the client aborts and frees the slot', async () => {
    await http(slow.url, 'POST', '/debug/faults', {
      hang_before_first_token_ms: -1,
      match_path: '/v1/completions',
    });
    // A hangs while holding the only slot.
    const ac = new AbortController();
    const a = request(slow.url + '/v1/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'hang-a' },
      body: JSON.stringify({ model: 'motor-sim-7b', prompt: 'hang', max_tokens: 2, stream: true }),
      signal: ac.signal,
    }).catch(() => null);
    await until(slow.url, (l) => l.in_flight.some((e) => e.id === 'hang-a' && e.state === 'prefill'));
    const b = post(slow.url, '/v1/chat/completions', chatBody('queued', { max_tokens: 2 }), {
      'x-request-id': 'queued-b',
    });
    await until(slow.url, (l) => l.in_flight.some((e) => e.id === 'queued-b' && e.state === 'queued'));
    const m = await http(slow.url, 'GET', '/metrics');
    expect(m.text).toMatch(/vllm:num_requests_waiting\{model_name="motor-sim-7b"\} 1/);
    expect(m.text).toMatch(/vllm:num_requests_running\{model_name="motor-sim-7b"\} 1/);
    ac.abort();
    await a;
    expect((await b).status).toBe(200);
    await http(slow.url, 'DELETE', '/debug/faults');
    const l = await idleLedger(slow.url);
    expect(l.in_flight).toEqual([]);
    expect(l.finished.find((f) => f.id === 'hang-a')).toMatchObject({
      outcome: 'aborted',
      reason: 'client_disconnect',
    });
    expect(l.finished.find((f) => f.id === 'queued-b')).toMatchObject({ outcome: 'completed' });
  });

  it('abort mid-stream stops generation (ledger: aborted, fewer tokens)', async () => {
    const ac = new AbortController();
    const res = await request(slow.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'mid-abort' },
      body: JSON.stringify(chatBody('long', { max_tokens: 5000, stream: true })),
      signal: ac.signal,
    });
    for await (const chunk of res.body) {
      if (String(chunk).includes('"content":" ')) break;
    }
    ac.abort();
    const l = await idleLedger(slow.url);
    const e = l.finished.find((f) => f.id === 'mid-abort')!;
    expect(e).toMatchObject({ outcome: 'aborted', reason: 'client_disconnect' });
    expect(e.output_tokens).toBeLessThan(5000);
  });
});

describe('motor sim: faults', () => {
  let f: MotorProcess;
  beforeAll(async () => {
    f = await startMotor(['sim', '--time-scale', '0']);
  });
  afterAll(async () => {
    await f?.stop();
  });
  const body = { model: 'motor-sim-7b', prompt: 'fault', max_tokens: 4 };

  it.each([500, 503, 429, 400])('error_next with status %i, then healthy again', async (status) => {
    await http(f.url, 'POST', '/debug/faults', { error_next: 2, error_status: status });
    expect((await post(f.url, '/v1/completions', body)).status).toBe(status);
    const second = await post(f.url, '/v1/completions', body);
    expect(second.status).toBe(status);
    expect(second.json.error.message).toMatch(/simulated fault/);
    expect((await post(f.url, '/v1/completions', body)).status).toBe(200);
    await http(f.url, 'DELETE', '/debug/faults');
  });

  it('error_every N fails exactly every Nth request; scoped by path and kv', async () => {
    await http(f.url, 'POST', '/debug/faults', { error_every: 3, match_path: '/v1/completions' });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await post(f.url, '/v1/completions', body)).status);
    expect(statuses).toEqual([200, 200, 500, 200, 200, 500]);
    expect((await post(f.url, '/v1/chat/completions', chatBody('x', { max_tokens: 1 }))).status).toBe(200);
    await http(f.url, 'POST', '/debug/faults', { error_every: 1, match_path: null, match_kv: 'with' });
    expect((await post(f.url, '/v1/completions', body)).status).toBe(200);
    await http(f.url, 'DELETE', '/debug/faults');
  });

  it('error_rate is seeded: the same seed gives the same sequence', async () => {
    const run = async () => {
      await http(f.url, 'POST', '/debug/faults', { error_rate: 0.5, seed: 42 });
      const s = [];
      for (let i = 0; i < 10; i++) s.push((await post(f.url, '/v1/completions', body)).status);
      return s;
    };
    const a = await run();
    expect(await run()).toEqual(a);
    expect(a).toContain(500);
    expect(a).toContain(200);
    await http(f.url, 'DELETE', '/debug/faults');
  });

  it('GET shows the config, bad patches are 400, DELETE resets', async () => {
    expect((await http(f.url, 'POST', '/debug/faults', { bogus: 1 })).status).toBe(400);
    expect((await http(f.url, 'POST', '/debug/faults', { error_status: 418 })).status).toBe(400);
    await http(f.url, 'POST', '/debug/faults', { slow_decode_factor: 3 });
    expect((await http(f.url, 'GET', '/debug/faults')).json.slow_decode_factor).toBe(3);
    const reset = await http(f.url, 'DELETE', '/debug/faults');
    expect(reset.json).toMatchObject({ slow_decode_factor: 1, error_rate: 0, die_after_tokens: -1 });
  });

  it('die_after_tokens: stream is cut mid-way without [DONE]; non-stream gets no response', async () => {
    await http(f.url, 'POST', '/debug/faults', { die_after_tokens: 2 });
    const res = await request(f.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'die-s' },
      body: JSON.stringify(chatBody('die', { max_tokens: 10, stream: true })),
    });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow();
    await expect(post(f.url, '/v1/completions', { ...body, max_tokens: 10 })).rejects.toThrow();
    await http(f.url, 'DELETE', '/debug/faults');
    const l = await idleLedger(f.url);
    expect(l.finished.find((e) => e.id === 'die-s')).toMatchObject({
      outcome: 'failed',
      reason: 'fault:die_after_tokens',
      output_tokens: 2,
    });
  });

  it('hang_before_first_token_ms delays the first token', async () => {
    await http(f.url, 'POST', '/debug/faults', { hang_before_first_token_ms: 150 });
    const t0 = performance.now();
    expect((await post(f.url, '/v1/completions', body)).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    await http(f.url, 'DELETE', '/debug/faults');
  });

  it('slow_decode_factor multiplies decode steps', async () => {
    const s = await startMotor(['sim', '--time-scale', '1', '--itl-ms', '1', '--prefill-overhead-ms', '0']);
    try {
      await http(s.url, 'POST', '/debug/faults', { slow_decode_factor: 10 });
      const t0 = performance.now();
      await post(s.url, '/v1/completions', { ...body, max_tokens: 11 });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(90); // 10 steps × 10 ms
    } finally {
      await s.stop();
    }
  });

  it('refuse_connections closes the next N connections', async () => {
    await http(f.url, 'POST', '/debug/faults', { refuse_connections: 1 });
    const port = Number(new URL(f.url).port);
    const closed = await new Promise<boolean>((resolve) => {
      const sock = connect(port, '127.0.0.1');
      sock.on('data', () => resolve(false));
      sock.on('close', () => resolve(true));
      sock.on('error', () => resolve(true));
      sock.write('GET /health HTTP/1.1\r\nhost: x\r\n\r\n');
    });
    expect(closed).toBe(true);
    expect((await http(f.url, 'GET', '/debug/faults')).json.refuse_connections).toBe(0);
  });
});

async function until(
  base: string,
  pred: (l: { in_flight: Array<{ id: string; state: string }> }) => boolean,
): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const l = (await http(base, 'GET', '/debug/requests')).json;
    if (pred(l)) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error('condition not reached');
}
