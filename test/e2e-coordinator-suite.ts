import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import { http, sseEvents } from '../src/simulator/testing/index.js';
import {
  engineIdOf,
  eventually,
  LAYERWISE,
  MODEL,
  NIXL,
  rawPost,
  recorded,
  resetSim,
  setFaults,
  settledLedgers,
  startCoordinatorProcess,
  startEngineProxy,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * The coordinator's end-to-end suite, run once per instance mode:
 * - `direct`: stock-engine simulators, no engine proxy; the coordinator itself writes vLLM
 *   `kv_transfer_params` / SGLang `bootstrap_*` and serves the trigger metaserver.
 * - `proxy`: a `motor engine-proxy` in front of every simulator; the coordinator sends the Motor
 *   envelope and `/v1/dispatch/stop`.
 * Conformance 12–28, 32–33 for handoff, trigger, bootstrap and single; after every test each
 * simulator's ledger shows no engine request left running.
 */
export function coordinatorSuite(mode: 'direct' | 'proxy'): void {
  type Flow = 'handoff' | 'trigger' | 'bootstrap' | 'single';
  const FLOWS: Flow[] = ['handoff', 'trigger', 'bootstrap', 'single'];

  let sims: Record<'vllmP' | 'vllmD' | 'sglP' | 'sglD' | 'union', MotorChild> = {} as never;
  const proxies: Partial<Record<string, MotorChild>> = {};
  const coords: Partial<Record<Flow | 'gate', CoordinatorHandle>> = {};
  const allSims = (): MotorChild[] => Object.values(sims);

  const common = {
    retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
    timeouts: { firstTokenMs: 10_000 },
    // the fault tests run back to back on shared instances (a persistent fault fails every migration
    // attempt too): no test here may open a circuit for the next one; breakers are tested on their own
    scheduling: { circuitBreaker: { failureThreshold: 1_000 } },
  };

  /** The trigger pair's prefill instance URL (the proxy in front of the vLLM prefill sim). */
  function triggerPrefillUrl(): string {
    return coordConfigUrl('trigger', 'P');
  }
  const instanceUrls: Record<string, string> = {};
  function coordConfigUrl(flow: string, id: string): string {
    return instanceUrls[`${flow}/${id}`]!;
  }

  /** Proxy mode: stops the engine proxies of a flow received with `reason` (from their /metrics). */
  async function stopsSeen(flow: Flow, reason: string): Promise<{ P: number; D: number }> {
    const count = async (url: string | undefined): Promise<number> => {
      if (!url) return 0;
      const text = (await http(url, 'GET', '/metrics')).text;
      let n = 0;
      for (const line of text.split('\n')) {
        if (line.startsWith('motor_proxy_stops_total{') && line.includes(`reason="${reason}"`)) {
          n += Number(line.slice(line.lastIndexOf(' ') + 1));
        }
      }
      return n;
    };
    return { P: await count(instanceUrls[`${flow}/P`]), D: await count(instanceUrls[`${flow}/D`]) };
  }

  function legsOf(flow: Flow): { P: MotorChild | null; D: MotorChild } {
    if (flow === 'handoff' || flow === 'trigger') return { P: sims.vllmP, D: sims.vllmD };
    if (flow === 'bootstrap') return { P: sims.sglP, D: sims.sglD };
    return { P: null, D: sims.union };
  }

  beforeAll(async () => {
    const [vllmP, vllmD, sglP, sglD, union] = await Promise.all([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startSim({ role: 'prefill', engine: 'sglang' }),
      startSim({ role: 'decode', engine: 'sglang' }),
      startSim({ role: 'union' }),
    ]);
    sims = { vllmP, vllmD, sglP, sglD, union };
    const SGLANG = { engine_type: 'sglang' };
    // instance URL per (sim, engine config): the sim itself (direct) or an engine proxy in front of it
    const front = async (sim: MotorChild, role: string, engineConfig: Record<string, unknown> | null) =>
      mode === 'direct'
        ? sim.url
        : (proxies[`${sim.url}-${JSON.stringify(engineConfig)}`] = await startEngineProxy(
            sim,
            role,
            engineConfig,
          )).url;
    const [hP, hD, tP, tD, bP, bD, u] = await Promise.all([
      front(vllmP, 'prefill', { kv_transfer_config: NIXL }),
      front(vllmD, 'decode', { kv_transfer_config: NIXL }),
      front(vllmP, 'prefill', { kv_transfer_config: LAYERWISE }),
      front(vllmD, 'decode', { kv_transfer_config: LAYERWISE }),
      front(sglP, 'prefill', SGLANG),
      front(sglD, 'decode', SGLANG),
      front(union, 'union', null),
    ]);
    const pd = (p: string, d: string, extra: Record<string, unknown>) => [
      { id: 'P', url: p, role: 'prefill', mode, models: [MODEL], ...extra },
      { id: 'D', url: d, role: 'decode', mode, models: [MODEL], ...extra },
    ];
    const started = await Promise.all([
      startCoordinatorProcess({
        ...common,
        instances: pd(hP!, hD!, { kvTransferConfig: NIXL }),
      }),
      startCoordinatorProcess({
        ...common,
        instances: pd(tP!, tD!, { kvTransferConfig: LAYERWISE }),
      }),
      startCoordinatorProcess({ ...common, instances: pd(bP!, bD!, { engine: 'sglang' }) }),
      startCoordinatorProcess({
        ...common,
        server: { maxBodyBytes: 64 * 1024 },
        instances: [{ id: 'U', url: u, role: 'union', mode, models: [MODEL] }],
      }),
      // incompatible P/D (handoff vs trigger) behind an API key (gateway tests run in direct mode only)
      mode !== 'direct'
        ? Promise.resolve(undefined)
        : startCoordinatorProcess({
            ...common,
            server: { apiKeys: ['sekret'] },
            instances: [
              { id: 'P', url: hP, role: 'prefill', mode, dispatchProfile: 'handoff', models: [MODEL] },
              { id: 'D', url: tD, role: 'decode', mode, dispatchProfile: 'trigger', models: [MODEL] },
            ],
          }),
    ]);
    [coords.handoff, coords.trigger, coords.bootstrap, coords.single, coords.gate] = started;
    Object.assign(instanceUrls, {
      'handoff/P': hP,
      'handoff/D': hD,
      'trigger/P': tP,
      'trigger/D': tD,
      'bootstrap/P': bP,
      'bootstrap/D': bD,
      'single/D': u,
    });
  }, 180_000);

  afterAll(async () => {
    await Promise.all(Object.values(coords).map((c) => c?.stop())); // also removes their temp configs
    await stopAllSpawned(); // sims, proxies, and anything a failed beforeAll left behind
  });

  beforeEach(async () => {
    await Promise.all(allSims().map(resetSim));
  });

  afterEach(async () => {
    // Nothing may be left running on any engine once the client has its answer (or left).
    const ledgers = await settledLedgers(allSims());
    for (const l of ledgers) expect(l.in_flight).toEqual([]);
  });

  const msgs = (text = 'Tell me about disaggregated serving') => [{ role: 'user' as const, content: text }];
  const longPrompt =
    'prefix caching works on whole token blocks so this prompt repeats a lot of words '.repeat(8);

  describe.each(FLOWS)(`${mode} %s`, (flow) => {
    const coord = (): CoordinatorHandle => coords[flow]!;
    const pd = flow !== 'single';

    it('non-stream: one request per leg, ids per attempt, prefill leg shape, no internal fields (17–21, 24)', async () => {
      const { P, D } = legsOf(flow);
      const { data, response } = await coord()
        .client.chat.completions.create({
          model: MODEL,
          messages: msgs(),
          max_tokens: 5,
          max_completion_tokens: 5,
          // @ts-expect-error vLLM extension
          min_tokens: 2,
        })
        .withResponse();
      const root = response.headers.get('x-request-id')!;
      expect(root).toMatch(/^req-/);
      expect(data.choices[0]!.message.content!.length).toBeGreaterThan(0);
      expect(data.usage!.completion_tokens).toBe(5);
      for (const key of Object.keys(data)) expect(key).not.toMatch(/^_motor_|kv_transfer_params|token_ids/);

      const d = await recorded(D);
      expect(d).toHaveLength(1);
      expect(engineIdOf(d[0]!)).toBe(`${root}#a1`);
      expect(d[0]!.headers['x-request-id']).toBe(`${root}#a1`);
      expect(d[0]!.body.max_tokens).toBe(5);
      if (!pd) return;
      const p = await recorded(P!);
      expect(p).toHaveLength(1);
      expect(engineIdOf(p[0]!)).toBe(`${root}#a1`);
      expect(p[0]!.body).toMatchObject({ stream: false, max_tokens: 1, max_completion_tokens: 1 });
      // Conformance 18 holds for the leg body; a vLLM prefill's engine request (handoff, and the
      // layer-wise trigger as vllm-ascend's proxy sends it) gets min_tokens 1 from its adapter.
      if (flow === 'handoff' || flow === 'trigger') expect(p[0]!.body.min_tokens).toBe(1);
      else expect(p[0]!.body).not.toHaveProperty('min_tokens');
      expect(p[0]!.body).not.toHaveProperty('stream_options');
      if (flow === 'handoff') {
        expect(p[0]!.body.kv_transfer_params).toEqual({ do_remote_decode: true, do_remote_prefill: false });
        const info = (await http(P!.url, 'GET', '/debug/info')).json as { engine_id: string };
        expect(d[0]!.body.kv_transfer_params).toMatchObject({
          do_remote_prefill: true,
          remote_engine_id: info.engine_id,
        });
      } else if (flow === 'trigger') {
        expect(d[0]!.body.kv_transfer_params).toEqual({
          do_remote_decode: false,
          do_remote_prefill: true,
          metaserver:
            mode === 'direct'
              ? expect.stringMatching(new RegExp(`^${coord().url}/v1/metaserver/[A-Za-z0-9_-]{22}$`))
              : `${triggerPrefillUrl()}/v1/metaserver`,
        });
        // the connector's metaserver body reaches the prefill verbatim: vLLM's external id included
        expect(p[0]!.body.kv_transfer_params).toMatchObject({
          request_id: `chatcmpl-${root}#a1`,
          do_remote_decode: true,
          remote_port: Number(new URL(D.url).port),
        });
      } else {
        expect(String(p[0]!.body.bootstrap_room)).toBe(String(d[0]!.body.bootstrap_room));
        expect(p[0]!.body.bootstrap_host).toBe('127.0.0.1');
        expect(d[0]!.body.bootstrap_host).toBe('127.0.0.1');
        // The port SGLang reports (`disaggregation_bootstrap_port`), learned by the coordinator (direct)
        // or the prefill's proxy: never the prefill's HTTP port.
        const info = (await http(P!.url, 'GET', '/server_info')).json as Record<string, unknown>;
        expect(d[0]!.body.bootstrap_port).toBe(info.disaggregation_bootstrap_port);
      }
    });

    it('stream: tokens, usage with cached tokens from the prefill leg, [DONE] (22, 23)', async () => {
      const run = async () => {
        const stream = await coord().client.chat.completions.create({
          model: MODEL,
          messages: msgs(longPrompt),
          max_tokens: 4,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = '';
        let usage: OpenAI.CompletionUsage | null | undefined = null;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          if (chunk.usage) usage = chunk.usage;
          expect(Object.keys(chunk).join()).not.toMatch(/_motor_|kv_transfer_params/);
        }
        return { text, usage };
      };
      const first = await run();
      expect(first.text.length).toBeGreaterThan(0);
      expect(first.usage!.completion_tokens).toBe(4);
      const second = await run();
      expect(second.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
      if (pd) {
        const p = await recorded(legsOf(flow).P!);
        expect(p.every((r) => r.body.stream === false && !('stream_options' in r.body))).toBe(true);
      }
    });

    it('completions API works too', async () => {
      const c = await coord().client.completions.create({
        model: MODEL,
        prompt: 'Once upon a time',
        max_tokens: 3,
      });
      expect(c.choices[0]!.text.length).toBeGreaterThan(0);
      expect(c.usage!.completion_tokens).toBe(3);
    });

    it('an engine 4xx before commit reaches the client unchanged and is not retried (23, 27)', async () => {
      const { D } = legsOf(flow);
      await setFaults(D, { error_next: 1, error_status: 400 });
      const err = await coord()
        .client.chat.completions.create({ model: MODEL, messages: msgs(), max_tokens: 3, stream: true })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain('simulated fault: HTTP 400');
      expect(await recorded(D)).toHaveLength(1);
    });

    it('a decode 5xx/429 before commit is retried as a new attempt (26, 27)', async () => {
      const { P, D } = legsOf(flow);
      await setFaults(D, { error_next: 2, error_status: 429 });
      const { data, response } = await coord()
        .client.chat.completions.create({ model: MODEL, messages: msgs(), max_tokens: 3 })
        .withResponse();
      const root = response.headers.get('x-request-id')!;
      expect(data.choices[0]!.message.content!.length).toBeGreaterThan(0);
      expect((await recorded(D)).map(engineIdOf)).toEqual([`${root}#a1`, `${root}#a2`, `${root}#a3`]);
      if (mode === 'proxy') {
        // the failed attempts were stopped on both legs (peer_failed)
        await eventually(async () => {
          const seen = await stopsSeen(flow, 'peer_failed');
          expect(seen.D).toBeGreaterThanOrEqual(2);
          if (flow !== 'single') expect(seen.P).toBeGreaterThanOrEqual(2);
        });
      }
      if (flow === 'handoff' || flow === 'bootstrap') {
        const p = await recorded(P!);
        expect(p.map(engineIdOf)).toEqual([`${root}#a1`, `${root}#a2`, `${root}#a3`]);
        if (flow === 'bootstrap') {
          const rooms = new Set(p.map((r) => String(r.body.bootstrap_room)));
          expect(rooms.size).toBe(3); // a new pair per attempt
        }
      }
    });

    it('retries are bounded: 503 after maxAttempts', async () => {
      const { D } = legsOf(flow);
      await setFaults(D, { error_next: 10, error_status: 503 });
      const err = await coord()
        .client.chat.completions.create({ model: MODEL, messages: msgs(), max_tokens: 3 })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
      expect(await recorded(D)).toHaveLength(3);
    });

    it('a failure after commit ends the stream with one error frame and [DONE] (28)', async () => {
      const { D } = legsOf(flow);
      await setFaults(D, { die_after_tokens: 2 });
      const r = await rawPost(coord().url, '/v1/chat/completions', {
        model: MODEL,
        messages: msgs(),
        max_tokens: 20,
        stream: true,
      });
      expect(r.status).toBe(200);
      const events = sseEvents(r.text);
      expect(events.at(-1)).toBe('[DONE]');
      const errors = events.filter((e) => typeof e === 'object' && e !== null && 'error' in e);
      expect(errors).toHaveLength(1);
      expect(events.at(-2)).toEqual(errors[0]);
      expect(events.length).toBeGreaterThan(2);
    });

    it('a client disconnect mid-stream aborts every leg (25)', async () => {
      const { D } = legsOf(flow);
      const ctl = new AbortController();
      const { data: stream, response } = await coord()
        .client.chat.completions.create(
          { model: MODEL, messages: msgs(), max_tokens: 2000, stream: true },
          { signal: ctl.signal },
        )
        .withResponse();
      const root = response.headers.get('x-request-id')!;
      let n = 0;
      try {
        for await (const _chunk of stream) {
          if (++n === 3) {
            ctl.abort();
            break;
          }
        }
      } catch (err) {
        expect(err).toBeInstanceOf(OpenAI.APIUserAbortError);
      }
      expect(n).toBe(3);
      const [ledger] = await settledLedgers([D]);
      const entry = ledger!.finished.find((e) => e.id === `${root}#a1`);
      expect(entry?.outcome).toBe('aborted');
      if (mode === 'proxy') {
        // both legs got POST /v1/dispatch/stop {reason: client_disconnect}
        await eventually(async () => {
          const seen = await stopsSeen(flow, 'client_disconnect');
          expect(seen.D).toBeGreaterThan(0);
          if (flow !== 'single') expect(seen.P).toBeGreaterThan(0);
        });
      }
      if (flow === 'bootstrap') {
        // SGLang also gets its abort call (fire-and-forget by the coordinator: poll for it)
        await eventually(async () => {
          const seen = (await http(D.url, 'GET', '/debug/recorded')).json as Array<{
            path: string;
            body: { rid: string };
          }>;
          expect(seen.some((a) => a.path === '/abort_request' && a.body.rid === `${root}#a1`)).toBe(true);
        });
      }
    });

    it('a client disconnect before the first byte aborts every leg (25, non-stream)', async () => {
      const { D } = legsOf(flow);
      await setFaults(D, { hang_before_first_token_ms: -1 });
      const err = await coord()
        .client.chat.completions.create(
          { model: MODEL, messages: msgs(), max_tokens: 3 },
          { signal: AbortSignal.timeout(400) },
        )
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.APIUserAbortError);
      const [ledger] = await settledLedgers([D]);
      expect(ledger!.finished.at(-1)?.outcome).toBe('aborted');
    });

    it('client-supplied internal fields never reach an engine (33)', async () => {
      for (const extra of [
        { kv_transfer_params: { do_remote_prefill: true } },
        { _motor_dispatch: { role: 'decode' } },
        { _motor_prefill_result: {} },
        { bootstrap_room: 1, bootstrap_host: 'evil' },
      ]) {
        const r = await rawPost(coord().url, '/v1/chat/completions', {
          model: MODEL,
          messages: msgs(),
          ...extra,
        });
        expect(r.status).toBe(400);
        expect(r.json.error.type).toBe('invalid_request_error');
      }
      const { P, D } = legsOf(flow);
      expect(await recorded(D)).toHaveLength(0);
      if (P) expect(await recorded(P)).toHaveLength(0);
    });
  });

  if (mode === 'direct')
    describe('direct trigger metaserver (20)', () => {
      // Issue 15 finding 1: the URL the decode leg gets carries a per-attempt token; no other call counts.
      it("no or a wrong token → 404 at once, whatever the body (a hijack under a victim's id)", async () => {
        const url = coords.trigger!.url;
        const fields = {
          request_id: 'chatcmpl-nope#a1',
          do_remote_decode: true,
          remote_block_ids: [1],
          remote_block_size: 16,
          remote_engine_id: 'e',
          remote_host: '127.0.0.1',
          remote_port: 1,
          remote_cached_tokens: 0,
        };
        const started = Date.now();
        for (const path of ['/v1/metaserver', `/v1/metaserver/${'A'.repeat(22)}`, '/v1/metaserver/x']) {
          expect((await rawPost(url, path, fields)).status).toBe(404);
          expect((await rawPost(url, path, { request_id: 'nope#a1' })).status).toBe(404);
        }
        // no waiting for an id that may come: the token is stored before the decode leg is sent
        expect(Date.now() - started).toBeLessThan(2_000);
      });
    });

  if (mode === 'direct')
    describe('gateway', () => {
      const single = (): CoordinatorHandle => coords.single!;

      it.each([
        ['malformed JSON', '{"model":', 400, 'invalid JSON'],
        ['not an object', '[1]', 400, 'JSON object'],
        ['missing model', JSON.stringify({ messages: msgs() }), 400, "'model'"],
        ['missing messages', JSON.stringify({ model: MODEL }), 400, "'messages'"],
        [
          'wrong type',
          JSON.stringify({ model: MODEL, messages: msgs(), max_tokens: 'ten' }),
          400,
          "'max_tokens'",
        ],
        ['oversized', JSON.stringify({ model: MODEL, messages: msgs('x'.repeat(70_000)) }), 413, 'exceeds'],
      ])('%s → 4xx with an OpenAI-style error, and keeps serving (32)', async (_name, body, status, text) => {
        const r = await rawPost(single().url, '/v1/chat/completions', body);
        expect(r.status).toBe(status);
        expect(r.json.error).toMatchObject({ type: 'invalid_request_error' });
        expect(r.json.error.message).toContain(text);
        const ok = await single().client.chat.completions.create({
          model: MODEL,
          messages: msgs(),
          max_tokens: 1,
        });
        expect(ok.choices).toHaveLength(1);
      });

      it('missing prompt on /v1/completions → 400', async () => {
        const r = await rawPost(single().url, '/v1/completions', { model: MODEL });
        expect(r.status).toBe(400);
        expect(r.json.error.param).toBe('prompt');
      });

      it('unknown model → 404; /v1/models lists the fleet; /health; /ready', async () => {
        const err = await single()
          .client.chat.completions.create({ model: 'nope', messages: msgs() })
          .then(
            () => null,
            (e: unknown) => e,
          );
        expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
        const models = await single().client.models.list();
        expect(models.data.map((m) => m.id)).toEqual([MODEL]);
        expect((await http(single().url, 'GET', '/health')).status).toBe(200);
        expect((await http(single().url, 'GET', '/ready')).status).toBe(200);
      });

      it('API keys, and a fleet without a shared plan is not ready and fails closed with 503 (14)', async () => {
        const gate = coords.gate!;
        const anon = await rawPost(gate.url, '/v1/chat/completions', { model: MODEL, messages: msgs() });
        expect(anon.status).toBe(401);
        expect(anon.json.error.type).toBe('authentication_error');
        const client = new OpenAI({ baseURL: `${gate.url}/v1`, apiKey: 'sekret', maxRetries: 0 });
        const err = await client.chat.completions.create({ model: MODEL, messages: msgs() }).then(
          () => null,
          (e: unknown) => e,
        );
        expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
        expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(
          /missing capability.*prefill_handoff_decode/,
        );
        const ready = await http(gate.url, 'GET', '/ready');
        expect(ready.status).toBe(503);
        expect(await recorded(sims.vllmP)).toHaveLength(0);
      });
    });
}
