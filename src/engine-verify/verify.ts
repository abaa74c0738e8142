import type { CoordinatorConfig } from '../config/coordinator-config.js';
import { engineCall, transportError } from './engine-call.js';
import { probePair, type PairObservation, type ProbeBounds } from './pair-probes.js';
import {
  authCheck,
  bootstrapCheck,
  eosHandoverCheck,
  handoffParamsCheck,
  kvLoadedCheck,
  metaserverCheck,
  metricsCheck,
  notApplicable,
} from './verify-checks.js';
import type { VerifyCheck, VerifyReport } from './verify-result.js';
import { pairName, verifyFleet, type VerifyPair, type VerifyTarget } from './verify-targets.js';

export interface VerifyOptions extends ProbeBounds {
  /** Probe requests sent through each pair (each costs one prefill and one decode). */
  probesPerPair: number;
  motorVersion: string;
}

/** The engine checks of one instance, and the model its `/v1/models` lists first (for the probes). */
async function instanceChecks(
  t: VerifyTarget,
  timeoutMs: number,
): Promise<{ checks: VerifyCheck[]; model: string | null }> {
  const status = async (withKey: boolean): Promise<{ status: number | string; body: unknown }> => {
    try {
      const r = await engineCall(t, 'GET', '/v1/models', { timeoutMs, withKey });
      return { status: r.status, body: r.json };
    } catch (err) {
      return { status: transportError(t.url, err), body: null };
    }
  };
  const keyed = t.apiKey !== null;
  const withoutKey = await status(false);
  const withKey = keyed ? await status(true) : null;
  const answered = (withKey ?? withoutKey).body as { data?: Array<{ id?: unknown }> } | null;
  const listed = answered?.data?.[0]?.id;
  const model = t.instance.models[0] ?? (typeof listed === 'string' ? listed : null);
  let metrics: string | { error: string };
  try {
    const r = await engineCall(t, 'GET', '/metrics', { timeoutMs });
    metrics = r.status === 200 ? r.text : { error: `GET /metrics answered ${r.status}` };
  } catch (err) {
    metrics = { error: transportError(t.url, err) };
  }
  return {
    model,
    checks: [
      authCheck(t.id, t.instance.engine, {
        keyConfigured: keyed,
        withoutKey: withoutKey.status,
        withKey: withKey?.status ?? null,
      }),
      metricsCheck(t.id, t.instance.engine, metrics),
    ],
  };
}

/** The pair checks one probe's observation yields, by the pair's flow. */
export function pairChecks(pair: VerifyPair, seen: PairObservation): VerifyCheck[] {
  const name = pairName(pair);
  const decodeError = 'error' in seen.decode ? seen.decode.error : null;
  const usage = 'usage' in seen.decode ? seen.decode.usage : null;
  const kv = kvLoadedCheck(name, pair.decode.instance.engine, usage, decodeError);
  if (pair.profile === 'handoff')
    return [
      handoffParamsCheck(name, pair.prefill.instance.kvConnector, seen.prefill),
      eosHandoverCheck(name, seen.prefill),
      kv,
      notApplicable(name, 'metaserver_call', 'handoff pair'),
      notApplicable(name, 'bootstrap', 'handoff pair'),
    ];
  if (pair.profile === 'bootstrap')
    return [
      notApplicable(name, 'handoff_params', 'SGLang bootstrap pair'),
      notApplicable(name, 'eos_handover', 'SGLang bootstrap pair: the KV goes through the room'),
      kv,
      notApplicable(name, 'metaserver_call', 'SGLang bootstrap pair'),
      bootstrapCheck(name, seen.bootstrap!, decodeError === null ? { ok: true } : { error: decodeError }),
    ];
  return [
    notApplicable(name, 'handoff_params', 'layer-wise pair: the prefill pushes'),
    notApplicable(name, 'eos_handover', 'layer-wise pair: the prefill pushes'),
    kv,
    metaserverCheck(name, seen.metaserver ?? { error: 'no metaserver observation' }),
    notApplicable(name, 'bootstrap', 'layer-wise pair'),
  ];
}

const RANK = { drift: 3, unknown: 2, ok: 1, skipped: 0 } as const;

/** Over several probes of one pair, each check keeps its worst row. */
function worstOf(runs: VerifyCheck[][]): VerifyCheck[] {
  const [first, ...rest] = runs;
  if (first === undefined) return [];
  return first.map((row, i) =>
    rest.reduce((worst, run) => (RANK[run[i]!.verdict] > RANK[worst.verdict] ? run[i]! : worst), row),
  );
}

/**
 * `motor verify`: engine checks per direct instance, then `probesPerPair` probes through each pair,
 * one at a time (bounded: a probe is one prefill and one decode of at most `maxTokens` tokens, each
 * call within `timeoutMs`).
 */
export async function verifyEngines(config: CoordinatorConfig, opts: VerifyOptions): Promise<VerifyReport> {
  const fleet = verifyFleet(config);
  const checks: VerifyCheck[] = [];
  const models = new Map<string, string>();
  for (const t of fleet.targets) {
    const r = await instanceChecks(t, opts.timeoutMs);
    if (r.model !== null) models.set(t.id, r.model);
    checks.push(...r.checks);
  }
  for (const pair of fleet.pairs) {
    const runs: VerifyCheck[][] = [];
    for (let i = 0; i < opts.probesPerPair; i++)
      runs.push(pairChecks(pair, await probePair(pair, models, opts)));
    checks.push(...worstOf(runs));
  }
  for (const line of fleet.notProbed) {
    const [id] = line.split(':', 1);
    checks.push(notApplicable(id!, 'auth', line.slice(id!.length + 2)));
  }
  return {
    motorVersion: opts.motorVersion,
    checkedAt: new Date().toISOString(),
    bounds: { probesPerPair: opts.probesPerPair, maxTokens: opts.maxTokens, timeoutMs: opts.timeoutMs },
    checks,
    drift: checks.some((c) => c.verdict === 'drift'),
  };
}
