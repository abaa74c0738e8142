import { afterEach, describe, expect, it } from 'vitest';
import { buildPrefillResult } from '../protocol/index.js';
import { engineReply } from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

/**
 * The engine body is spliced from the envelope's bytes (json-splice.ts): the members the adapter
 * keeps reach the engine as the coordinator wrote them — a 20-digit seed is not rounded to a double,
 * `1.0` stays `1.0` — the Motor fields are left out, and each added member appears once.
 */

const HANDOFF = 'prefill_handoff_decode';
const SEED = '12345678901234567890'; // past 2^53: JSON.parse + stringify would send 12345678901234567000
let proxy: InProcessProxy;
afterEach(() => proxy.close());

/** An envelope body as text, with the client's spelling of a few members and a `words`-word prompt. */
function envelopeText(
  role: string,
  root: string,
  words: number,
  extra: Record<string, unknown> = {},
): string {
  const content = 'lorem ipsum '.repeat(words);
  const motor = JSON.stringify({
    _motor_dispatch: envelope(role, HANDOFF, { root, prefillUrl: PREFILL_PEER, decodeUrl: DECODE_PEER }),
    ...extra,
  }).slice(1, -1);
  return `{"model":"m","messages":[{"role":"user","content":"${content}"}],"seed":${SEED},"temperature":1.0,${motor}}`;
}

const decodeExtra = (root: string) => ({
  _motor_prefill_result: buildPrefillResult({
    root_request_id: root,
    engine_request_id: `${root}#a1`,
    pair_id: `pair-${root}`,
    attempt_seq: 1,
    status: 'completed',
    handoff_mode: 'handoff',
    payload: { remote_engine_id: 'p', remote_block_ids: [1] },
    expires_at_ms: Date.now() + 60_000,
  }),
});

describe('engine body spliced from the envelope', () => {
  it.each([
    // below and above the size where the body goes to undici as a list of buffers (request-body.ts)
    ['prefill, short prompt', 'prefill', 4, { min_tokens: 1 }],
    ['prefill, 48 KiB prompt', 'prefill', 4096, { min_tokens: 1 }],
    [
      'decode, short prompt',
      'decode',
      4,
      { kv_transfer_params: { remote_engine_id: 'p', remote_block_ids: [1] } },
    ],
    [
      'decode, 48 KiB prompt',
      'decode',
      4096,
      { kv_transfer_params: { remote_engine_id: 'p', remote_block_ids: [1] } },
    ],
  ])('%s: kept members as spelt, Motor fields out, added ones once', async (_n, role, words, added) => {
    const answer =
      role === 'prefill'
        ? { id: 'c', object: 'chat.completion', choices: [], kv_transfer_params: { remote_engine_id: 'p' } }
        : { id: 'c', object: 'chat.completion', choices: [] };
    proxy = await startInProcessProxy({ role: role === 'prefill' ? 'prefill' : 'decode' }, () =>
      engineReply(200, answer),
    );
    const root = `s-${role}-${words}`;
    const res = await proxy.call(
      'POST',
      '/v1/chat/completions',
      envelopeText(role, root, words, role === 'decode' ? decodeExtra(root) : {}),
    );
    expect(res.status).toBe(200);
    const sent = String(proxy.engine.requests[0]!.body);
    expect(sent).toContain(`"seed":${SEED}`);
    expect(sent).toContain('"temperature":1.0');
    expect(sent).not.toContain('_motor_');
    expect(sent.split('"request_id"')).toHaveLength(2);
    expect(JSON.parse(sent)).toMatchObject({
      model: 'm',
      messages: [{ role: 'user', content: 'lorem ipsum '.repeat(words) }],
      request_id: `${root}#a1`,
      ...added,
    });
  });
});
