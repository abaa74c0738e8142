import { afterAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, post } from './testing/index.js';

const log = createLogger('sim-lease', 'silent');
const started: RunningSimulator[] = [];
afterAll(async () => {
  await Promise.all(started.map((s) => s.close()));
});

const PROMPT = 'A decode that queues behind a full batch must keep the prefill lease alive.';

describe('handoff KV lease while the decode queues (batch full)', () => {
  it.each([
    // newest NIXL: heartbeats renew the 300 ms lease while the decode waits ~600 ms for a slot
    ['nixl-newest', [], 200],
    // ... but only when the params carry all five heartbeat fields (here tp_size is dropped)
    ['nixl-newest', ['tp_size'], 500],
    // the 2026-01 connector has no heartbeat: only its abort timeout (here 300 ms) counts
    ['nixl-2026-01', [], 500],
  ] as const)('%s, params without %j → %i', async (version, drop, status) => {
    const common = { engine: 'vllm' as const, engineVersion: version, kvLeaseMs: 300 };
    const p = await startSimulator({ ...common, role: 'prefill', timeScale: 0 }, log);
    const d = await startSimulator(
      { ...common, role: 'decode', maxNumSeqs: 1, timeScale: 1, itlMs: 10, prefillOverheadMs: 0 },
      log,
    );
    started.push(p, d);
    // Fill the decode's only slot for ~600 ms; the first chunk says it is running.
    const busy = await request(d.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('occupy', { max_tokens: 60, stream: true })),
    });
    const chunks = busy.body[Symbol.asyncIterator]();
    await chunks.next();
    const pr = await post(
      p.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 1, kv_transfer_params: { do_remote_decode: true } }),
    );
    const params = { ...(pr.json.kv_transfer_params as Record<string, unknown>) };
    for (const k of drop) delete params[k];
    const dec = await post(
      d.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 2, kv_transfer_params: params }),
    );
    expect(dec.status).toBe(status);
    if (status !== 200) expect(dec.json.error.message).toMatch(/lease expired/);
    while (!(await chunks.next()).done); // let the occupier finish
  });
});
