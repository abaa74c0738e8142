import { describe, expect, it } from 'vitest';
import { fixtureBody, loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { buildMotorDispatch } from '../protocol/index.js';
import { engineRequestIdCandidates } from './engine-request-id.js';
import { engineAdapterFor, parseMetaserverKvFields } from './index.js';

/**
 * Contract: every layer-wise metaserver body the real connector sends (by release) is accepted,
 * maps back to the X-Request-Id Motor sent, and reaches the prefill verbatim as the reference
 * proxy passes it (test/fixtures/engines/README.md facts 1–7).
 */
const METASERVER_CALLS = [
  'vllm-ascend/layerwise-v0.13/metaserver-call.chat.json',
  'vllm-ascend/layerwise-v0.13/metaserver-call.completions.json',
  'vllm-ascend/layerwise-v0.14/metaserver-call.chat.json',
  'vllm-ascend/layerwise-v0.15/metaserver-call.chat.json',
  'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json',
  'vllm-ascend/layerwise-v0.17/metaserver-call.completions.json',
  'vllm-ascend/layerwise-v0.17/metaserver-call.full-prefix-hit.json',
];
/** The X-Request-Id behind every fixture's request_id. */
const BARE = '3f9a0c1e2b7d4e5f8a6b9c0d1e2f3a4b';

const vllm = engineAdapterFor('vllm');
const dispatch = buildMotorDispatch({
  root_request_id: 'r',
  engine_request_id: BARE,
  pair_id: 'p',
  attempt_seq: 1,
  role: 'prefill',
  dispatch_mode: 'concurrent_engine_sync',
  endpoints: {
    prefill: { instance_id: 1, endpoint_id: 0, url: 'http://10.0.0.5:8000' },
    decode: { instance_id: 2, endpoint_id: 0, url: 'http://10.0.0.21:8000' },
  },
});

describe.each(METASERVER_CALLS)('%s', (path) => {
  const body = fixtureBody(path);

  it('parses, and the parsed value is the body itself', () => {
    const parsed = parseMetaserverKvFields(body);
    expect(parsed).toEqual({ ok: true, value: body });
    expect(parsed.ok && parsed.value).toBe(body);
  });

  it('normalises to the bare id', () => {
    expect(engineRequestIdCandidates(body.request_id as string)).toContain(BARE);
  });

  it('yields prefill kv_transfer_params with every key of the body', () => {
    const r = vllm.buildEngineRequest('trigger_prefill', {
      body: { model: 'qwen', messages: [{ role: 'user', content: 'Hello' }] },
      dispatch,
      triggerKv: body as never,
    });
    if (!r.ok) throw new Error(r.message);
    expect(r.body.kv_transfer_params).toEqual({ ...body, do_remote_decode: true, do_remote_prefill: false });
    for (const key of Object.keys(body)) expect(r.body.kv_transfer_params).toHaveProperty([key]);
  });
});

describe('trigger prefill request', () => {
  it("matches the layer-wise proxy's prefill request (v0.17 fixture), X-Request-Id = Motor's id", () => {
    const expected = fixtureBody('vllm-ascend/layerwise-v0.17/prefill-request.chat.json');
    const call = fixtureBody('vllm-ascend/layerwise-v0.17/metaserver-call.chat.json');
    const r = vllm.buildEngineRequest('trigger_prefill', {
      // what the coordinator caches for the prefill: the client body, stream options and all
      body: {
        model: 'qwen',
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 64,
        stream: true,
        stream_options: { include_usage: true },
      },
      dispatch,
      triggerKv: call as never,
    });
    if (!r.ok) throw new Error(r.message);
    const { request_id, ...rest } = r.body;
    expect(request_id).toBe(BARE);
    expect(rest).toEqual(expected);
    expect(r.headers['x-request-id']).toBe(BARE);
  });
});

describe('metaserver answers', () => {
  it.each([
    ['metaserver-response.ok.json', 200],
    ['metaserver-response.unknown-id.json', 404],
  ])('%s is status %i', (file, status) => {
    expect(loadEngineFixture(`vllm-ascend/layerwise-v0.17/${file}`).status).toBe(status);
  });
});
