import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { request } from 'undici';
import { startMotor, type MotorProcess } from './helpers/motor-process.js';
import {
  chatBody,
  http,
  idleLedger,
  post,
  sseEvents,
  type LedgerSnapshot,
} from '../src/simulator/testing/index.js';

const PROMPT = 'Disaggregated serving moves the KV cache from prefill to decode; this prompt spans blocks.';

/** Polls the ledger until `pred` holds: the event, however long a loaded machine takes (the test's timeout bounds it). */
async function until(base: string, pred: (l: LedgerSnapshot) => boolean): Promise<void> {
  while (!pred((await http(base, 'GET', '/debug/requests')).json as LedgerSnapshot))
    await new Promise((r) => setTimeout(r, 2));
}

/**
 * The decode's `--kv-wait-ms`: how long it waits for a pushed KV (and for the metaserver call it made).
 * Two tests wait it out on purpose; the others need the metaserver round trip, the prefill and the push
 * inside it, so it sits far above a loaded machine's scheduling gaps (500 ms was missed at load 20).
 */
const KV_WAIT_MS = 3_000;

describe('vLLM P/D: handoff (NixlConnector) and trigger (MooncakeLayerwiseConnector)', () => {
  let p: MotorProcess;
  let d: MotorProcess;
  let shortLease: MotorProcess;
  beforeAll(async () => {
    [p, d, shortLease] = await Promise.all([
      startMotor(['sim', '--role', 'prefill', '--kv-connector', 'NixlConnector', '--time-scale', '0']),
      startMotor([
        'sim',
        '--role',
        'decode',
        '--kv-connector',
        'NixlConnector',
        '--time-scale',
        '0',
        '--kv-wait-ms',
        String(KV_WAIT_MS),
      ]),
      startMotor(['sim', '--role', 'prefill', '--time-scale', '0', '--kv-lease-ms', '30']),
    ]);
  });
  afterAll(async () => {
    await Promise.all([p?.stop(), d?.stop(), shortLease?.stop()]);
  });

  async function prefill(base: string, id: string) {
    const r = await post(
      base,
      '/v1/chat/completions',
      chatBody(PROMPT, {
        max_tokens: 1,
        kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
      }),
      { 'x-request-id': id },
    );
    expect(r.status).toBe(200);
    return r.json;
  }

  it('prefill returns kv_transfer_params like newest vLLM NIXL and holds the blocks', async () => {
    const r = await prefill(p.url, 'h-1');
    const port = Number(new URL(p.url).port);
    expect(r.usage.completion_tokens).toBe(1);
    // Shape checked field by field against the fixtures in src/simulator/engine-profiles.fixtures.test.ts.
    expect(r.kv_transfer_params).toMatchObject({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: expect.any(String),
      remote_host: '127.0.0.1',
      remote_port: port,
      tp_size: 1,
    });
    const rid = r.kv_transfer_params.remote_request_id as string;
    expect(rid).toMatch(/^chatcmpl-h-1-[0-9a-f]{8}$/); // vLLM's internal id: external id + random suffix
    expect(r.kv_transfer_params.remote_block_ids[0]).toHaveLength(Math.ceil(r.usage.prompt_tokens / 16));
    const l = await idleLedger(p.url);
    expect(l.kv_held).toEqual([
      expect.objectContaining({
        request_id: rid,
        kind: 'handoff_prefill',
        blocks: r.kv_transfer_params.remote_block_ids[0].length,
      }),
    ]);
    await post(p.url, '/internal/kv/release', { remote_request_id: rid });
    expect((await idleLedger(p.url)).kv_held).toEqual([]);
  });

  it.each([false, true])(
    'decode (stream=%s) pulls the KV, reports it cached, output equals a union run',
    async (stream) => {
      const r = await prefill(p.url, `h-dec-${stream}`);
      const plain = await post(d.url, '/v1/chat/completions', chatBody(PROMPT, { max_tokens: 8 }));
      const dec = await post(
        d.url,
        '/v1/chat/completions',
        chatBody(PROMPT, {
          max_tokens: 8,
          kv_transfer_params: r.kv_transfer_params,
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        }),
      );
      expect(dec.status).toBe(200);
      if (stream) {
        const ev = sseEvents(dec.text) as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
        const text = ev
          .slice(1, -2)
          .map((e) => e.choices[0].delta.content)
          .join('');
        expect(text).toBe(plain.json.choices[0].message.content);
        expect(ev.at(-2).usage.prompt_tokens_details.cached_tokens).toBe(r.usage.prompt_tokens);
      } else {
        expect(dec.json.choices[0].message.content).toBe(plain.json.choices[0].message.content);
        expect(dec.json.usage.prompt_tokens_details.cached_tokens).toBe(r.usage.prompt_tokens);
      }
      expect((await idleLedger(p.url)).kv_held).toEqual([]);
      const fin = (await idleLedger(d.url)).finished.at(-1)!;
      expect(fin).toMatchObject({ flow: 'handoff_decode', outcome: 'completed' });
    },
  );

  it('a second decode of the same blocks fails clearly (blocks already read)', async () => {
    const r = await prefill(p.url, 'h-twice');
    const body = chatBody(PROMPT, { max_tokens: 2, kv_transfer_params: r.kv_transfer_params });
    expect((await post(d.url, '/v1/chat/completions', body)).status).toBe(200);
    const again = await post(d.url, '/v1/chat/completions', body);
    expect(again.status).toBe(500);
    expect(again.json.error.message).toMatch(
      /KV transfer failed.*no KV blocks held for request chatcmpl-h-twice-/,
    );
  });

  it('lease expiry releases the blocks; a late decode fails', async () => {
    const r = await prefill(shortLease.url, 'h-lease');
    // the lease is wall-clock time: wait for its expiry to show (the test's timeout bounds the wait)
    while ((await idleLedger(shortLease.url)).kv_held.length > 0)
      await new Promise((res) => setTimeout(res, 5));
    const late = await post(
      d.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 2, kv_transfer_params: r.kv_transfer_params }),
    );
    expect(late.status).toBe(500);
    expect(late.json.error.message).toMatch(/lease expired/);
  });

  it('decode fails clearly when the prefill is unreachable, and on a prompt mismatch', async () => {
    const r = await prefill(p.url, 'h-gone');
    const gone = await post(
      d.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 2, kv_transfer_params: { ...r.kv_transfer_params, remote_port: 1 } }),
    );
    expect(gone.status).toBe(500);
    expect(gone.json.error.message).toMatch(/prefill unreachable/);
    const other = await post(
      d.url,
      '/v1/chat/completions',
      chatBody(PROMPT + ' (changed)', { max_tokens: 2, kv_transfer_params: r.kv_transfer_params }),
    );
    expect(other.status).toBe(500);
    expect(other.json.error.message).toMatch(/KV transfer mismatch/);
    const missing = await post(
      d.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { kv_transfer_params: { do_remote_prefill: true, remote_host: '127.0.0.1' } }),
    );
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toMatch(/kv_transfer_params.remote_port/);
  });

  it('a stream:true prefill streams; its params reach nobody, the KV is held all the same', async () => {
    const r = await post(
      p.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 1, stream: true, kv_transfer_params: { do_remote_decode: true } }),
      { 'x-request-id': 'h-stream' },
    );
    expect(r.status).toBe(200);
    const ev = sseEvents(r.text) as Array<Record<string, unknown>>;
    expect(ev.at(-1)).toBe('[DONE]');
    expect(r.text).not.toContain('kv_transfer_params');
    const held = (await idleLedger(p.url)).kv_held.find((k) => k.request_id.startsWith('chatcmpl-h-stream-'));
    expect(held).toBeDefined();
    await post(p.url, '/internal/kv/release', { remote_request_id: held!.request_id });
  });

  it.each([
    [
      'do_remote_prefill on a prefill',
      'p',
      { kv_transfer_params: { do_remote_prefill: true } },
      /not valid on a prefill/,
    ],
    [
      'do_remote_decode on a decode',
      'd',
      { kv_transfer_params: { do_remote_decode: true } },
      /not valid on a decode/,
    ],
  ])('%s → 400', async (_n, which, extra, msg) => {
    const r = await post(which === 'p' ? p.url : d.url, '/v1/chat/completions', chatBody(PROMPT, extra));
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(msg);
  });

  describe('trigger: decode calls the metaserver, which runs the prefill; the prefill pushes KV', () => {
    let meta: Server;
    let metaUrl = '';
    let mode: 'forward' | 'error' | 'no-push' = 'forward';
    const metaBodies: Record<string, unknown>[] = [];
    beforeAll(async () => {
      meta = createServer((req, res) => {
        let text = '';
        req.on('data', (c) => (text += c));
        req.on('end', async () => {
          const fields = JSON.parse(text) as Record<string, unknown>;
          metaBodies.push(fields);
          if (mode === 'error') {
            res
              .writeHead(500, { 'content-type': 'application/json' })
              .end('{"error":{"message":"prefill exploded"}}');
            return;
          }
          if (mode === 'no-push') {
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
            return;
          }
          const r = await post(
            p.url,
            '/v1/chat/completions',
            chatBody(PROMPT, { max_tokens: 1, kv_transfer_params: fields }),
            {
              'x-request-id': `${String(fields.request_id)}-prefill`,
            },
          );
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.text);
        });
      });
      await new Promise<void>((r) => meta.listen(0, '127.0.0.1', r));
      metaUrl = `http://127.0.0.1:${(meta.address() as { port: number }).port}/v1/metaserver`;
    });
    afterAll(async () => {
      await new Promise((r) => meta.close(r));
    });

    const decode = (id: string) =>
      post(
        d.url,
        '/v1/chat/completions',
        chatBody(PROMPT, {
          max_tokens: 4,
          kv_transfer_params: { do_remote_prefill: true, do_remote_decode: false, metaserver: metaUrl },
        }),
        { 'x-request-id': id },
      );

    it('happy path: metaserver body as vllm-ascend ≥ v0.17 sends it; decode reports the prompt cached', async () => {
      mode = 'forward';
      const r = await decode('t-1');
      expect(r.status).toBe(200);
      expect(r.json.usage.prompt_tokens_details.cached_tokens).toBe(r.json.usage.prompt_tokens);
      expect(metaBodies.at(-1)).toEqual({
        token_ids: [],
        request_id: 'chatcmpl-t-1',
        do_remote_prefill: false,
        do_remote_decode: true,
        remote_block_ids: [expect.any(Array)],
        remote_block_size: [16],
        remote_engine_id: expect.any(String),
        remote_host: '127.0.0.1',
        remote_port: Number(new URL(d.url).port),
        remote_tp_size: 1,
        remote_pcp_size: 1,
        remote_dcp_size: 1,
        remote_cached_tokens: expect.any(Number),
      });
      expect((await idleLedger(p.url)).finished.at(-1)).toMatchObject({
        id: 'chatcmpl-t-1-prefill',
        flow: 'trigger_prefill',
        outcome: 'completed',
      });
      expect((await idleLedger(d.url)).kv_held).toEqual([]);
    });

    it('metaserver non-2xx is ignored (as the connector does): the decode waits for KV until --kv-wait-ms', async () => {
      mode = 'error';
      const t0 = Date.now();
      const r = await decode('t-err');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(KV_WAIT_MS - 50);
      expect(r.status).toBe(500);
      expect(r.json.error.message).toMatch(
        new RegExp(`did not arrive within ${KV_WAIT_MS} ms \\(metaserver .* answered 500\\)`),
      );
    });

    it('push never comes → decode fails after --kv-wait-ms', async () => {
      mode = 'no-push';
      const r = await decode('t-nopush');
      expect(r.status).toBe(500);
      expect(r.json.error.message).toContain(`did not arrive within ${KV_WAIT_MS} ms`);
      expect((await idleLedger(d.url)).kv_held).toEqual([]);
    });

    it('metaserver unreachable → decode fails', async () => {
      const unreachable = 'http://127.0.0.1:1/v1/metaserver';
      const r = await post(
        d.url,
        '/v1/chat/completions',
        chatBody(PROMPT, { kv_transfer_params: { do_remote_prefill: true, metaserver: unreachable } }),
      );
      expect(r.status).toBe(500);
      expect(r.json.error.message).toMatch(/did not arrive .*metaserver .* unreachable/);
      // _access_metaserver: 3 tries, only because each raised. This test's calls only: an earlier test's
      // call still in flight when its KV wait ended logs its own failed try.
      const tries = d.logs.filter((l) => l.msg === 'metaserver call failed' && l.url === unreachable);
      expect(tries.map((l) => l.try)).toEqual([1, 2, 3]);
    });

    it('a push for a request nobody waits for is refused, and the prefill fails clearly', async () => {
      const r = await post(
        p.url,
        '/v1/chat/completions',
        chatBody(PROMPT, {
          max_tokens: 1,
          kv_transfer_params: {
            do_remote_decode: true,
            request_id: 'nobody',
            remote_host: '127.0.0.1',
            remote_port: Number(new URL(d.url).port),
            remote_block_ids: [1, 2],
          },
        }),
      );
      expect(r.status).toBe(500);
      expect(r.json.error.message).toMatch(/KV push to decode .* failed: no decode request nobody/);
    });
  });
});

describe('SGLang P/D: bootstrap rendezvous', () => {
  let p: MotorProcess;
  let d: MotorProcess;
  /** The prefill's bootstrap server: its own port, not the HTTP port (SGLang disaggregation_bootstrap_port). */
  let bootstrapPort: number;
  beforeAll(async () => {
    // the rendezvous must finish inside the bootstrap timeout: far above a loaded machine's gaps
    const common = ['--engine', 'sglang', '--time-scale', '0', '--bootstrap-timeout-ms', '5000'];
    [p, d] = await Promise.all([
      startMotor(['sim', '--role', 'prefill', '--bootstrap-port', '0', ...common]),
      startMotor(['sim', '--role', 'decode', ...common]),
    ]);
    bootstrapPort = (await http(p.url, 'GET', '/debug/info')).json.bootstrap_port as number;
  });
  afterAll(async () => {
    await Promise.all([p?.stop(), d?.stop()]);
  });

  /** Raw JSON so the room stays an exact integer literal beyond 2^53. */
  const body = (room: string, rid: string, port: number) =>
    `{"model":"motor-sim-7b","messages":[{"role":"user","content":${JSON.stringify(PROMPT)}}],"max_tokens":5,` +
    `"rid":"${rid}","bootstrap_host":"127.0.0.1","bootstrap_port":${port},"bootstrap_room":${room}}`;
  const send = (base: string, room: string, rid: string) =>
    post(base, '/v1/chat/completions', body(room, rid, bootstrapPort));

  it.each(['prefill-first', 'decode-first'])('%s: both sides rendezvous on a 63-bit room', async (order) => {
    const room = order === 'prefill-first' ? '9007199254740993' : '9223372036854775807';
    let pr, dr;
    if (order === 'prefill-first') {
      pr = send(p.url, room, `${order}-p`);
      await until(p.url, (l) => l.kv_held.some((k) => k.request_id === `${order}-p`));
      dr = send(d.url, room, `${order}-d`);
    } else {
      dr = send(d.url, room, `${order}-d`);
      await until(d.url, (l) => l.in_flight.some((e) => e.id === `${order}-d` && e.state === 'waiting_kv'));
      pr = send(p.url, room, `${order}-p`);
    }
    const [a, b] = await Promise.all([pr, dr]);
    expect(a.status).toBe(200);
    expect(a.json.usage.completion_tokens).toBe(1);
    expect(a.json.id).toBe(`${order}-p`);
    expect(b.status).toBe(200);
    expect(b.json.usage.completion_tokens).toBe(5);
    expect(b.json.usage.prompt_tokens_details.cached_tokens).toBe(b.json.usage.prompt_tokens);
    expect((await idleLedger(p.url)).kv_held).toEqual([]);
    const rec = (await http(p.url, 'GET', '/debug/recorded')).json as Array<{
      body: { bootstrap_room?: unknown };
    }>;
    expect(rec.some((r) => String(r.body?.bootstrap_room) === room)).toBe(true);
  });

  it('rooms differing only beyond 2^53 do not meet: both sides time out clearly', async () => {
    const [a, b] = await Promise.all([
      send(p.url, '9007199254740993', 'near-p'),
      send(d.url, '9007199254740992', 'near-d'),
    ]);
    expect(a.status).toBe(500);
    expect(a.json.error.message).toMatch(/bootstrap timeout: no decode joined room 9007199254740993/);
    expect(b.status).toBe(500);
    expect(b.json.error.message).toMatch(/no prefill for room 9007199254740992/);
    const l = await idleLedger(p.url);
    expect(l.kv_held).toEqual([]);
    expect(l.finished.find((f) => f.id === 'near-p')).toMatchObject({
      outcome: 'failed',
      reason: 'bootstrap_timeout',
    });
  });

  it('decode fails clearly when the bootstrap server is unreachable', async () => {
    const r = await post(d.url, '/v1/chat/completions', body('5', 'unreach', 1));
    expect(r.status).toBe(500);
    expect(r.json.error.message).toMatch(/bootstrap 127.0.0.1:1 unreachable/);
  });

  it('POST /abort_request aborts a running request by rid', async () => {
    const u = await startMotor(['sim', '--engine', 'sglang', '--time-scale', '1', '--itl-ms', '2']);
    try {
      const res = await request(u.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chatBody('abort me', { max_tokens: 5000, stream: true, rid: 'ab-1' })),
      });
      const chunks: string[] = [];
      let asked = false;
      for await (const c of res.body) {
        chunks.push(String(c));
        if (!asked && chunks.join('').includes('"content":" ')) {
          asked = true;
          const a = await post(u.url, '/abort_request', { rid: 'ab-1' });
          expect([a.status, a.text]).toEqual([200, '']);
        }
      }
      const ev = sseEvents(chunks.join('')) as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(ev.at(-1)).toBe('[DONE]');
      expect(ev.at(-2).choices[0].finish_reason).toBe('abort');
      const l = await idleLedger(u.url);
      expect(l.finished.find((f) => f.id === 'ab-1')).toMatchObject({
        outcome: 'aborted',
        reason: 'abort_request',
      });
      expect((await post(u.url, '/abort_request', { rid: 'unknown' })).status).toBe(200);
    } finally {
      await u.stop();
    }
  });
});
