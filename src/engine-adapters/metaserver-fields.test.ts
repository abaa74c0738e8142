import { describe, expect, it } from 'vitest';
import { metaserverRequestId, parseMetaserverKvFields } from './metaserver-fields.js';
import { engineAdapterFor } from './index.js';
import { buildMotorDispatch } from '../protocol/index.js';

/** The fields the prefill needs; everything else is the connector's business. */
const minimal = {
  request_id: 'chatcmpl-r#a1',
  remote_block_ids: [1, 2],
  remote_engine_id: 'd',
  remote_host: '10.0.0.2',
  remote_port: 7000,
};

describe('parseMetaserverKvFields', () => {
  it.each<[string, Record<string, unknown>]>([
    ['the required keys only', minimal],
    ['per-group block ids (≥ v0.17)', { ...minimal, remote_block_ids: [[1], [2, 3]] }],
    ['an empty block list (full prefix hit)', { ...minimal, remote_block_ids: [] }],
    [
      'other value kinds (port as a string, numeric engine id)',
      { ...minimal, remote_port: '7000', remote_engine_id: 3 },
    ],
    ['no do_remote_decode, block size or cached tokens (v0.13)', { ...minimal, token_ids: [] }],
  ])('accepts %s, verbatim', (_name, body) => {
    const r = parseMetaserverKvFields(body);
    expect(r.ok && r.value).toBe(body);
  });

  it.each<[string, unknown, string]>([
    ['not an object', [minimal], '(root)'],
    ['no request_id', { ...minimal, request_id: undefined }, 'request_id'],
    ['an empty request_id', { ...minimal, request_id: '' }, 'request_id'],
    ['block ids not an array', { ...minimal, remote_block_ids: 3 }, 'remote_block_ids'],
    ['no engine id', { ...minimal, remote_engine_id: undefined }, 'remote_engine_id'],
    ['a null host', { ...minimal, remote_host: null }, 'remote_host'],
    ['no port', { ...minimal, remote_port: undefined }, 'remote_port'],
  ])('refuses %s, naming %s', (_name, body, param) => {
    const r = parseMetaserverKvFields(body);
    expect(r).toMatchObject({ ok: false, param });
    expect(!r.ok && r.message.startsWith(`${param}: `)).toBe(true);
  });

  it.each([
    [{ request_id: 'x' }, 'x'],
    [{ request_id: '' }, null],
    [{ request_id: 3 }, null],
    [null, null],
  ])('metaserverRequestId(%j) = %j', (body, id) => {
    expect(metaserverRequestId(body)).toBe(id);
  });
});

describe('completions prompt list in the trigger flow', () => {
  const vllm = engineAdapterFor('vllm');
  const dispatch = (role: 'prefill' | 'decode') =>
    buildMotorDispatch({
      root_request_id: 'r',
      engine_request_id: 'r#a1',
      pair_id: 'p',
      attempt_seq: 1,
      role,
      dispatch_mode: 'concurrent_engine_sync',
      endpoints: {
        prefill: { instance_id: 1, endpoint_id: 0, url: 'http://10.0.0.1:9000' },
        decode: { instance_id: 2, endpoint_id: 0, url: 'http://10.0.0.2:9000' },
      },
    });

  it.each<[string, unknown, boolean]>([
    ['one string', 'hi', true],
    ['a list of one string', ['hi'], true],
    ['one token list', [1, 2, 3], true],
    ['a list of one token list', [[1, 2]], true],
    ['two strings', ['a', 'b'], false],
    ['two token lists', [[1], [2]], false],
  ])('%s: served %s', (_name, prompt, served) => {
    for (const [leg, role] of [
      ['trigger_decode', 'decode'],
      ['trigger_prefill', 'prefill'],
    ] as const) {
      const r = vllm.buildEngineRequest(leg, {
        body: { model: 'm', prompt },
        dispatch: dispatch(role),
        triggerKv: minimal,
      });
      if (served) expect(r.ok).toBe(true);
      else expect(r).toMatchObject({ ok: false, status: 400, param: 'prompt' });
    }
  });
});
