import { describe, expect, it } from 'vitest';
import {
  authCheck,
  bootstrapCheck,
  eosHandoverCheck,
  handoffParamsCheck,
  kvLoadedCheck,
  metaserverCheck,
  metricsCheck,
} from './verify-checks.js';

const NIXL_NEWEST = {
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_block_ids: [[1, 2]],
  remote_engine_id: 'e',
  remote_request_id: 'cmpl-x-0-abcdef12',
  remote_host: '10.0.0.1',
  remote_port: 5600,
  tp_size: 1,
  dcp_size: 1,
  pp_size: 1,
  remote_num_tokens: 40,
  remote_blocks_expiry_time: null,
  transfer_mode: 'pull',
};
const MOONCAKE_V013 = {
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_block_ids: [1, 2],
  remote_engine_id: 'e',
  remote_host: 'h',
  remote_port: 1,
  remote_pcp_size: 1,
  remote_dcp_size: 1,
  last_token_id: 7,
  remote_multi_nodes_meta_mapping: { '0': {} },
  num_prompt_blocks: 2,
};

describe('handoffParamsCheck', () => {
  it.each<[string, string | undefined, unknown, string, number | null]>([
    ['NIXL newest', 'NixlConnector', NIXL_NEWEST, 'ok', 14],
    [
      'NIXL 2026-01 (no transfer_mode)',
      'NixlConnector',
      { ...NIXL_NEWEST, transfer_mode: undefined },
      'ok',
      14,
    ],
    [
      'push answer for a pull config',
      'NixlPullConnector',
      { ...NIXL_NEWEST, transfer_mode: 'push' },
      'drift',
      14,
    ],
    [
      'push answer for the push config',
      'NixlPushConnector',
      { ...NIXL_NEWEST, transfer_mode: 'push' },
      'ok',
      45,
    ],
    ['pull answer for a push config', 'NixlPushConnector', NIXL_NEWEST, 'drift', 45],
    ['no remote_request_id', 'NixlConnector', { ...NIXL_NEWEST, remote_request_id: undefined }, 'drift', 14],
    ['no tp_size (no heartbeat)', 'NixlConnector', { ...NIXL_NEWEST, tp_size: undefined }, 'drift', 13],
    ['port as a string', 'NixlConnector', { ...NIXL_NEWEST, remote_port: '5600' }, 'drift', 14],
    ['Mooncake v0.13 (no remote_request_id)', 'MooncakeConnectorV1', MOONCAKE_V013, 'ok', 25],
    [
      'Mooncake without last_token_id',
      'MooncakeConnectorV1',
      { ...MOONCAKE_V013, last_token_id: undefined },
      'drift',
      25,
    ],
    ['no connector named: common keys only', undefined, MOONCAKE_V013, 'ok', 14],
    ['null params', 'NixlConnector', null, 'unknown', 8],
  ])('%s → %s (fact %s)', (_name, connector, params, verdict, fact) => {
    const clean = params === null ? null : JSON.parse(JSON.stringify(params));
    const r = handoffParamsCheck('p → d', connector, { params: clean, finishReason: 'length' });
    expect(r.verdict).toBe(verdict);
    expect(r.fact).toBe(fact);
    expect(r.fix === null).toBe(verdict !== 'drift');
  });
});

describe('eosHandoverCheck', () => {
  it.each<[string, unknown, string | null, string]>([
    ['length-capped, handed over', { a: 1 }, 'length', 'ok'],
    ['EOS and handed over (newest NIXL)', { a: 1 }, 'stop', 'ok'],
    ['EOS despite min_tokens, nothing handed', null, 'stop', 'drift'],
    ['length-capped yet nothing handed', null, 'length', 'drift'],
  ])('%s → %s', (_name, params, finishReason, verdict) => {
    expect(eosHandoverCheck('p → d', { params, finishReason })).toMatchObject({ verdict, fact: 34 });
  });
});

describe('kvLoadedCheck', () => {
  it.each<[string, unknown, string | null, string]>([
    ['loaded', { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 96 } }, null, 'ok'],
    ['recomputed', { prompt_tokens: 100, prompt_tokens_details: { cached_tokens: 0 } }, null, 'drift'],
    ['not reported', { prompt_tokens: 100 }, null, 'unknown'],
    ['decode failed', null, 'decode answered 500', 'unknown'],
  ])('%s → %s', (_name, usage, error, verdict) => {
    expect(kvLoadedCheck('p → d', 'vllm', usage, error)).toMatchObject({ verdict, fact: 46 });
  });
});

describe('authCheck', () => {
  it.each<[string, 'vllm' | 'sglang', boolean, number | string, number | null, string, number]>([
    ['open engine, no key', 'vllm', false, 200, null, 'ok', 21],
    ['engine wants a key the config lacks', 'vllm', false, 401, null, 'drift', 21],
    ['key configured and taken', 'sglang', true, 401, 200, 'ok', 22],
    ['key configured and refused', 'sglang', true, 401, 401, 'drift', 22],
    ['unreachable', 'vllm', false, 'connect ECONNREFUSED', null, 'unknown', 21],
  ])('%s → %s', (_name, engine, keyConfigured, withoutKey, withKey, verdict, fact) => {
    expect(authCheck('p', engine, { keyConfigured, withoutKey, withKey })).toMatchObject({ verdict, fact });
  });
});

describe('metricsCheck', () => {
  const VLLM =
    'vllm:num_requests_running{m="x"} 0\nvllm:num_requests_waiting{m="x"} 0\nvllm:gpu_cache_usage_perc 0.1\n';
  it.each<[string, 'vllm' | 'sglang', string | { error: string }, string]>([
    ['vLLM with the older KV alias', 'vllm', VLLM, 'ok'],
    ['vLLM without waiting', 'vllm', 'vllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0\n', 'drift'],
    ['SGLang names on a vLLM', 'vllm', 'sglang:num_running_reqs 0\n', 'drift'],
    [
      'SGLang',
      'sglang',
      'sglang:num_running_reqs 1\nsglang:num_queue_reqs 0\nsglang:token_usage 0.2\n',
      'ok',
    ],
    ['no answer', 'sglang', { error: 'GET /metrics answered 404' }, 'unknown'],
  ])('%s → %s', (_name, engine, text, verdict) => {
    expect(metricsCheck('p', engine, text).verdict).toBe(verdict);
  });
});

describe('metaserverCheck', () => {
  const body = (id: string) => ({
    request_id: id,
    remote_block_ids: [],
    remote_engine_id: 'e',
    remote_host: 'h',
    remote_port: 1,
  });
  it.each<[string, unknown, string, number]>([
    ['completions id with vLLM suffix', body('cmpl-r#a1-0-0123abcd'), 'ok', 2],
    ['chat id', body('chatcmpl-r#a1'), 'ok', 2],
    ['an id of another request', body('cmpl-other-0'), 'drift', 2],
    ['no remote_host', { ...body('cmpl-r#a1-0'), remote_host: null }, 'drift', 4],
  ])('%s → %s', (_name, b, verdict, fact) => {
    expect(metaserverCheck('p → d', { body: b, issuedId: 'r#a1' })).toMatchObject({ verdict, fact });
  });
});

describe('bootstrapCheck', () => {
  it.each<[string, 'engine' | 'rust-server' | 'config' | 'default', boolean, string, number]>([
    ['reported port, decode done', 'engine', true, 'ok', 19],
    ['Rust server, decode done', 'rust-server', true, 'ok', 42],
    ['default 8998, decode failed', 'default', false, 'drift', 16],
    ['reported port, decode failed for another reason', 'engine', false, 'unknown', 19],
  ])('%s → %s', (_name, from, done, verdict, fact) => {
    const r = bootstrapCheck('p → d', { port: 8998, from }, done ? { ok: true } : { error: 'timeout' });
    expect(r).toMatchObject({ verdict, fact });
  });
});
