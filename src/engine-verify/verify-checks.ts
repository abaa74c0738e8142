import { ENGINE_LOAD_SERIES } from '../coordinator/fleet/engine-metrics-scraper.js';
import {
  decodeKvLoad,
  engineRequestIdCandidates,
  parseMetaserverKvFields,
  requestIdForm,
  type SglangBootstrapPort,
} from '../engine-adapters/index.js';
import type { EngineKind } from '../protocol/index.js';
import { describeRule, handoffParamRules, paramMismatches } from './handoff-expectations.js';
import { drift, ok, skipped, unknown, type VerifyCheck } from './verify-result.js';

/**
 * The checks of `motor verify` as pure functions of what a probe saw on the wire; the probes
 * (verify-probes.ts) gather it. Each returns one report row naming the fact its expectation is from.
 */

/** What an engine answered to `GET /v1/models` without and with its configured key. */
export interface AuthSeen {
  keyConfigured: boolean;
  withoutKey: number | string;
  /** Status with the configured key (null when none is configured). */
  withKey: number | string | null;
}

/**
 * vLLM's `--api-key` guards `/v1/*` (fact 21), SGLang's every route but health and metrics (fact
 * 22); both answer 401 without the key. Motor sends the configured key as `Authorization: Bearer`.
 */
export function authCheck(target: string, engine: EngineKind, seen: AuthSeen): VerifyCheck {
  const fact = engine === 'sglang' ? 22 : 21;
  const row = (expected: string, s: string) => ({ target, check: 'auth' as const, fact, expected, seen: s });
  const what = `GET /v1/models: ${seen.withoutKey} without a key${seen.withKey === null ? '' : `, ${seen.withKey} with the configured key`}`;
  if (typeof seen.withoutKey === 'string') return unknown(row('an HTTP answer', seen.withoutKey));
  if (!seen.keyConfigured) {
    if (seen.withoutKey === 200) return ok(row('200 (no key configured)', what));
    if (seen.withoutKey === 401)
      return drift(
        row('200 (no key configured)', what),
        `the engine runs with --api-key: set instances '${target}' apiKeyEnv to a variable holding it`,
      );
    return unknown(row('200 (no key configured)', what));
  }
  if (seen.withKey === 200)
    return ok(
      row(
        '200 with the configured key',
        seen.withoutKey === 401 ? what : `${what} (the engine takes any caller)`,
      ),
    );
  if (seen.withKey === 401)
    return drift(
      row('200 with the configured key', what),
      `the engine refuses the configured key: instances '${target}' apiKey/apiKeyEnv must be its --api-key`,
    );
  return unknown(row('200 with the configured key', what));
}

/** The load series Motor's scheduler reads, by engine (engine-metrics-scraper.ts, fact 20 for SGLang). */
export function expectedLoadSeries(engine: EngineKind): string[][] {
  const names = Object.entries(ENGINE_LOAD_SERIES).filter(([n]) => n.startsWith(`${engine}:`));
  const bySignal = (s: string): string[] => names.filter(([, v]) => v === s).map(([n]) => n);
  // KV usage: either name counts (vLLM's older `gpu_cache_usage_perc` is an alias).
  return [bySignal('running'), bySignal('waiting'), [...bySignal('kv'), ...bySignal('kvLegacy')]];
}

/** Which of Motor's load series a `/metrics` text carries. */
export function metricsCheck(
  target: string,
  engine: EngineKind,
  text: string | { error: string },
): VerifyCheck {
  const groups = expectedLoadSeries(engine);
  const expected = groups.map((g) => g.join(' or ')).join(', ');
  const row = (s: string) => ({
    target,
    check: 'metrics' as const,
    fact: engine === 'sglang' ? 20 : null,
    expected,
    seen: s,
  });
  if (typeof text !== 'string') return unknown(row(text.error));
  const has = (name: string): boolean => new RegExp(`^${name}[{ ]`, 'm').test(text);
  const missing = groups.filter((g) => !g.some(has)).map((g) => g.join(' or '));
  if (missing.length === 0) return ok(row('all present in GET /metrics'));
  return drift(
    row(`missing: ${missing.join(', ')}`),
    "Motor's load-aware scheduling reads these names: report the engine release (attach `motor verify --json`)",
  );
}

/** A handoff prefill answer: its `kv_transfer_params` and how the one token ended. */
export interface PrefillSeen {
  params: unknown;
  finishReason: string | null;
}

/** The prefill answer's `kv_transfer_params` against Motor's reading of the configured connector. */
export function handoffParamsCheck(
  target: string,
  connector: string | undefined,
  seen: PrefillSeen | { error: string },
): VerifyCheck {
  const rules = handoffParamRules(connector);
  const base = {
    target,
    check: 'handoff_params' as const,
    expected: `${connector ?? 'any handoff connector'}: ${rules.map(describeRule).join(', ')}`,
  };
  if ('error' in seen) return unknown({ ...base, fact: null, seen: seen.error });
  const params = seen.params;
  if (params === null || params === undefined)
    return unknown({
      ...base,
      fact: 8,
      seen: 'kv_transfer_params null: nothing handed over (see eos_handover)',
    });
  if (typeof params !== 'object' || Array.isArray(params))
    return drift(
      { ...base, fact: 14, seen: `kv_transfer_params is ${JSON.stringify(params).slice(0, 60)}` },
      'the engine answered no KV handle: check its --kv-transfer-config',
    );
  const wrong = paramMismatches(params as Record<string, unknown>, rules);
  if (wrong.length === 0)
    return ok({ ...base, fact: rules.at(-1)!.fact, seen: Object.keys(params).join(', ') });
  const first = wrong[0]!;
  const pushPull = first.rule.key === 'transfer_mode';
  return drift(
    {
      ...base,
      fact: first.rule.fact,
      seen: wrong.map((w) => `${w.rule.key}: ${w.seen}`).join('; '),
    },
    pushPull
      ? `the engine runs the other NIXL mode: set instances '${target.split(' → ')[0]}' kvTransferConfig.kv_connector to ${first.seen === '"push"' ? 'NixlPushConnector' : 'NixlPullConnector'} (push and pull never pair)`
      : `this engine release answers another shape than Motor reads for ${connector ?? 'its connector'}: check kvTransferConfig.kv_connector matches the engine, else report the release (attach --json)`,
  );
}

/**
 * Motor's prefill shaping (`max_tokens: 1, min_tokens: 1`) means the token can never be EOS (fact
 * 34), so every connector hands over, also those that drop EOS-ended requests (facts 8, 10).
 */
export function eosHandoverCheck(target: string, seen: PrefillSeen | { error: string }): VerifyCheck {
  const base = {
    target,
    check: 'eos_handover' as const,
    fact: 34,
    expected: 'finish_reason "length" and kv_transfer_params handed over',
  };
  if ('error' in seen) return unknown({ ...base, seen: seen.error });
  const handed = typeof seen.params === 'object' && seen.params !== null;
  const what = `finish_reason ${JSON.stringify(seen.finishReason)}, kv_transfer_params ${handed ? 'present' : 'null'}`;
  if (handed) return ok({ ...base, seen: what });
  return drift(
    { ...base, seen: what },
    seen.finishReason === 'length'
      ? 'the prefill ended length-capped yet handed nothing over: check the engine logs for its KV connector (kv_role kv_producer/kv_both)'
      : 'the engine ended the one-token prefill by EOS despite min_tokens: 1, so decodes recompute: report the release (attach --json)',
  );
}

/**
 * The decode's own usage tells whether it loaded the KV it was handed (kv-load.ts): a silent
 * recompute reports few cached tokens. vLLM shows them only with `--enable-prompt-tokens-details`.
 */
export function kvLoadedCheck(
  target: string,
  engine: EngineKind,
  usage: unknown,
  error: string | null,
): VerifyCheck {
  const base = {
    target,
    check: 'kv_loaded' as const,
    fact: 46,
    expected: 'usage.prompt_tokens_details.cached_tokens ≥ half of prompt_tokens',
  };
  if (error !== null) return unknown({ ...base, seen: error });
  const load = decodeKvLoad(usage);
  const what = `cached_tokens ${load.cachedTokens ?? 'absent'} of prompt_tokens ${load.promptTokens ?? 'absent'}`;
  if (load.verdict === 'loaded') return ok({ ...base, seen: what });
  if (load.verdict === 'unknown')
    return unknown({
      ...base,
      seen: `${what}: ${engine === 'vllm' ? 'start the decode with --enable-prompt-tokens-details' : 'start the decode with --enable-cache-report'} to see it`,
    });
  return drift(
    { ...base, seen: `${what}: the decode recomputed the prompt` },
    'the decode did not load the KV: check it reaches the prefill at the handed-over remote_host/remote_port (or bootstrap address), that both run the same connector and release, and the decode log for KV load failures',
  );
}

/** A layer-wise decode's metaserver call as the probe's metaserver received it. */
export interface MetaserverSeen {
  body: unknown;
  /** The `X-Request-Id` the probe's decode leg was sent with. */
  issuedId: string;
}

/**
 * The metaserver body carries what the prefill needs (metaserver-fields.ts, facts 1, 4) and a
 * `request_id` that maps back to the decode's `X-Request-Id` (facts 2, 3).
 */
export function metaserverCheck(target: string, seen: MetaserverSeen | { error: string }): VerifyCheck {
  const base = {
    target,
    check: 'metaserver_call' as const,
    expected:
      'request_id, remote_block_ids, remote_engine_id, remote_host, remote_port; id maps to X-Request-Id',
  };
  if ('error' in seen) return unknown({ ...base, fact: 1, seen: seen.error });
  const parsed = parseMetaserverKvFields(seen.body);
  if (!parsed.ok)
    return drift(
      { ...base, fact: 4, seen: parsed.message },
      'this layer-wise release posts another body than Motor reads: report the release (attach --json)',
    );
  const id = parsed.value.request_id;
  if (!engineRequestIdCandidates(id).includes(seen.issuedId))
    return drift(
      { ...base, fact: 2, seen: `request_id ${id} for X-Request-Id ${seen.issuedId}` },
      'the connector names the request in a form Motor cannot map back: report the release (attach --json)',
    );
  return ok({ ...base, fact: 2, seen: `request_id form ${requestIdForm(id, seen.issuedId)}` });
}

/**
 * Where Motor points SGLang legs for the rendezvous: the port `/server_info` reports (fact 19), the
 * HTTP port for the Rust server (fact 42), else configured / SGLang's default 8998 (fact 16). The
 * proof is the pair's decode: it finishes only when the rendezvous worked.
 */
export function bootstrapCheck(
  target: string,
  resolved: SglangBootstrapPort,
  decode: { ok: true } | { error: string },
): VerifyCheck {
  const fact = resolved.from === 'rust-server' ? 42 : resolved.from === 'engine' ? 19 : 16;
  const base = {
    target,
    check: 'bootstrap' as const,
    fact,
    expected: 'the decode finishes through the prefill bootstrap address',
  };
  const where = `port ${resolved.port} (${resolved.from})`;
  if ('ok' in decode) return ok({ ...base, seen: `rendezvous on ${where}` });
  if (resolved.from === 'engine' || resolved.from === 'rust-server')
    return unknown({ ...base, seen: `decode failed with ${where}: ${decode.error}` });
  return drift(
    { ...base, seen: `decode failed with ${where}: ${decode.error}` },
    `the prefill reports no bootstrap port: set instances '${target.split(' → ')[0]}' bootstrapPort to its --disaggregation-bootstrap-port (or bootstrapOnHttpPort: true for SGLANG_RUST_SERVER=1)`,
  );
}

/** A check that does not apply to a pair's flow. */
export const notApplicable = (target: string, check: VerifyCheck['check'], why: string): VerifyCheck =>
  skipped({ target, check, fact: null, expected: '-', seen: why });
