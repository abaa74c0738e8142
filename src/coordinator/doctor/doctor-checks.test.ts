import { describe, expect, it } from 'vitest';
import type { KvHashGroup } from '../../config/kv-hash-section.js';
import type { KvSubscriberStatus } from '../../kv-events/kv-event-subscriber.js';
import type { Instance } from '../fleet/instance-source.js';
import { CachedTokensSamples } from './cached-tokens-samples.js';
import { Doctor, type DoctorReport } from './doctor.js';
import {
  blockHashesCheck,
  blockSizeCheck,
  cachedTokensCheck,
  eventStreamCheck,
  firstDifference,
  tokensCheck,
  type CheckResult,
  type EngineTokens,
  type HashProbe,
} from './doctor-checks.js';

const where = { group: 'qwen3', tokenizerPath: '/models/qwen3' };
const pick = (r: CheckResult) => ({ verdict: r.verdict, fix: r.fix === null ? null : 'fix' });

describe('tokensCheck', () => {
  it.each<[string, number[] | { error: string }, EngineTokens, string, RegExp]>([
    ['identical ids', [1, 2, 3], { tokens: [1, 2, 3], via: 'POST /tokenize' }, 'ok', /3 tokens, identical/],
    [
      'a different id',
      [1, 2, 3],
      { tokens: [1, 9, 3], via: 'POST /tokenize' },
      'drift',
      /first difference at token 1: Motor 2, engine 9/,
    ],
    [
      'engine longer',
      [1, 2],
      { tokens: [1, 2, 3], via: 'POST /tokenize' },
      'drift',
      /at token 2: Motor \(end\), engine 3/,
    ],
    ['equal count', [1, 2, 3], { count: 3, via: 'usage' }, 'ok', /ids not compared/],
    ['other count', [1, 2, 3], { count: 4, via: 'usage' }, 'drift', /Motor counts 3 tokens, the engine 4/],
    ['engine error', [1], { error: 'POST /tokenize answered 500' }, 'unknown', /answered 500/],
    ['Motor error', { error: 'not running' }, { count: 1, via: 'usage' }, 'unknown', /could not tokenise/],
  ])('%s', (_name, motor, engine, verdict, detail) => {
    const r = tokensCheck('chat_template', motor, engine, where);
    expect(r.verdict).toBe(verdict);
    expect(r.detail).toMatch(detail);
    expect(r.fix === null).toBe(verdict !== 'drift');
  });

  it('names the tokenizer files or the chat template in the fix', () => {
    const engine = { tokens: [9], via: 'POST /tokenize' };
    expect(tokensCheck('tokenizer', [1], engine, where).fix).toMatch(/tokenizer\.path .*\/models\/qwen3/);
    expect(tokensCheck('chat_template', [1], engine, where).fix).toMatch(/chat template/);
  });

  it('firstDifference', () => {
    expect(firstDifference([1, 2], [1, 2])).toBe(-1);
    expect(firstDifference([], [])).toBe(-1);
    expect(firstDifference([1], [2])).toBe(0);
    expect(firstDifference(Uint32Array.from([1, 2]), [1])).toBe(1);
  });
});

describe('blockSizeCheck', () => {
  it.each<[number, number | null, number | null, string, RegExp]>([
    [16, 16, null, 'ok', /16 tokens per block \(BlockStored events\)/],
    [16, null, 16, 'ok', /vllm:cache_config_info/],
    [32, 16, 32, 'drift', /Motor hashes 32-token blocks, the engine 16 \(BlockStored/],
    [16, null, 64, 'drift', /the engine 64 \(vllm:cache_config_info\)/],
    [16, null, null, 'unknown', /no BlockStored event yet/],
  ])('configured %i, events %s, metrics %s → %s', (configured, events, metrics, verdict, detail) => {
    const r = blockSizeCheck(configured, { events, metrics }, 'g');
    expect(r.verdict).toBe(verdict);
    expect(r.detail).toMatch(detail);
    if (verdict === 'drift')
      expect(r.fix).toBe(
        `set kvHash.groups 'g' blockHash.blockSize to ${events ?? metrics} (the engine's --block-size)`,
      );
  });
});

describe('blockHashesCheck', () => {
  const configured = { algo: 'sha256', blockSize: 16, seed: '0' };
  it.each<[string, HashProbe, string, RegExp | null]>([
    ['found', { found: true, matchedWith: null, batchesAfterProbe: 1 }, 'ok', null],
    [
      'other algo matches',
      { found: false, matchedWith: { algo: 'sha256_cbor', blockSize: 16 }, batchesAfterProbe: 1 },
      'drift',
      /algo to sha256_cbor and blockSize to 16/,
    ],
    [
      'no match, events came',
      { found: false, matchedWith: null, batchesAfterProbe: 2 },
      'drift',
      /PYTHONHASHSEED/,
    ],
    [
      'no match, the engine names an algorithm Motor lacks',
      { found: false, matchedWith: null, batchesAfterProbe: 2, engineAlgo: 'xxhash' },
      'drift',
      /PYTHONHASHSEED/,
    ],
    ['no events after the probe', { found: false, matchedWith: null, batchesAfterProbe: 0 }, 'unknown', null],
    [
      'probe failed',
      { found: false, matchedWith: null, batchesAfterProbe: 0, error: 'HTTP 500' },
      'unknown',
      null,
    ],
  ])('%s', (_name, probe, verdict, fix) => {
    const r = blockHashesCheck(probe, configured, 'g');
    expect(r.verdict).toBe(verdict);
    if (probe.engineAlgo) expect(r.detail).toMatch(/says prefix_caching_hash_algo=xxhash$/);
    if (fix) expect(r.fix).toMatch(fix);
    else expect(r.fix).toBeNull();
  });
});

describe('eventStreamCheck', () => {
  const live: KvSubscriberStatus = {
    instance: 'e0',
    lastSeq: 41n,
    lastBatchAtMs: 9_000,
    lagMs: 3,
    batches: 42,
    gaps: 0,
    resyncs: 0,
    blockSize: 16,
    error: null,
  };
  it.each<[string, KvSubscriberStatus | undefined, string, RegExp]>([
    ['live', live, 'ok', /last batch 1 s ago \(seq 41\), 42 batches, 0 gaps, 0 resyncs, lag 3 ms/],
    ['gaps replayed', { ...live, gaps: 2 }, 'ok', /2 gaps, 0 resyncs/],
    ['joined a running stream', { ...live, gaps: 1, resyncs: 1 }, 'ok', /1 gaps, 1 resyncs/],
    ['gaps resynced', { ...live, gaps: 2, resyncs: 2 }, 'drift', /2 gaps, 2 resyncs/],
    ['restart only', { ...live, resyncs: 1 }, 'ok', /1 resyncs/],
    ['failed', { ...live, error: 'connection refused' }, 'drift', /stream failed: connection refused/],
    ['no batch yet', { ...live, lastSeq: null, lastBatchAtMs: null }, 'unknown', /no batch received yet/],
    ['not subscribed', undefined, 'drift', /does not subscribe/],
  ])('%s', (_name, status, verdict, detail) => {
    const r = eventStreamCheck(status, 10_000, 'e0');
    expect(pick(r)).toEqual({ verdict, fix: verdict === 'drift' ? 'fix' : null });
    expect(r.detail).toMatch(detail);
  });
});

describe('cachedTokensCheck', () => {
  const exact = (n: number) => Array.from({ length: n }, (_, i) => ({ predicted: 16 * i, reported: 16 * i }));
  it.each<[string, Array<{ predicted: number; reported: number }>, string, RegExp]>([
    ['none yet', [], 'unknown', /no precisely routed request/],
    ['all exact', exact(10), 'ok', /10 of 10 recent requests predicted exactly/],
    ['99 of 100', [...exact(99), { predicted: 32, reported: 16 }], 'ok', /99 of 100/],
    [
      'one of two off',
      [...exact(1), { predicted: 32, reported: 16 }],
      'drift',
      /1 of 2 .* \(e\.g\. predicted 32, reported 16\)/,
    ],
  ])('%s', (_name, samples, verdict, detail) => {
    const r = cachedTokensCheck(samples, 'g');
    expect(r.verdict).toBe(verdict);
    expect(r.detail).toMatch(detail);
  });
});

describe('Doctor: a check that does not apply is skipped, never drift', () => {
  const instance = (over: Partial<Instance>): Instance =>
    ({
      id: 'p0',
      url: 'http://127.0.0.1:1',
      role: 'prefill',
      engine: 'vllm',
      mode: 'proxy',
      models: [],
      inFlight: 0,
      ...over,
    }) as Instance;
  const group: KvHashGroup = {
    name: 'g',
    models: ['m'],
    tokenizer: { path: '/models/m' },
    blockHash: { algo: 'sha256', blockSize: 16, seed: '0' },
  } as KvHashGroup;
  const doctor = (instances: Instance[], groups: KvHashGroup[]) =>
    new Doctor({
      groups,
      source: { all: () => instances },
      upstreams: { request: () => Promise.reject(new Error('no engine call expected')) },
      hub: () => null,
      keys: () => null,
      samples: new CachedTokensSamples(),
    });
  const verdicts = (r: DoctorReport) =>
    Object.fromEntries(r.instances[0]!.checks.map((c) => [c.check, c.verdict]));

  it.each<[string, Instance, KvHashGroup[], Record<string, string>, boolean]>([
    [
      'no kvHash group, no KV events (the default fleet)',
      instance({}),
      [],
      { event_stream: 'skipped', block_size: 'skipped' },
      false,
    ],
    [
      'a group over a proxy-mode instance without events',
      instance({ models: ['m'] }),
      [group],
      {
        tokenizer: 'skipped',
        chat_template: 'skipped',
        block_size: 'unknown',
        block_hashes: 'skipped',
        event_stream: 'drift', // hashing configured for it, but nothing to keep the index current
        cached_tokens: 'unknown',
      },
      true,
    ],
  ])('%s', async (_name, inst, groups, want, drift) => {
    const report = await doctor([inst], groups).run();
    expect(verdicts(report)).toEqual(want);
    expect(report.drift).toBe(drift);
    for (const c of report.instances[0]!.checks) if (c.verdict === 'skipped') expect(c.detail).not.toBe('');
  });
});
