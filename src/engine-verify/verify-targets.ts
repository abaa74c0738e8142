import type { CoordinatorConfig, ResolvedInstance } from '../config/coordinator-config.js';
import { canPair } from '../scheduling/pair-compatibility.js';
import type { EngineEndpoint } from './engine-call.js';

/** One engine `motor verify` probes, from the coordinator config's instances (direct mode). */
export interface VerifyTarget extends EngineEndpoint {
  id: string;
  instance: ResolvedInstance;
}

export interface VerifyPair {
  prefill: VerifyTarget;
  decode: VerifyTarget;
  /** The pair's flow, from the prefill's classified profile. */
  profile: 'handoff' | 'trigger' | 'bootstrap';
}

export interface VerifyFleet {
  targets: VerifyTarget[];
  pairs: VerifyPair[];
  /** Instances not probed, one line each (proxy mode: the engine proxy stands in front of the engine). */
  notProbed: string[];
}

/**
 * The engines and P/D pairs of a config: direct-mode instances only (a proxy-mode URL is an engine
 * proxy, whose engine is not reachable from here), paired as the coordinator pairs them — same
 * profile, and engine and KV connector family where both name one (pair-compatibility.ts).
 */
export function verifyFleet(config: CoordinatorConfig): VerifyFleet {
  const targets: VerifyTarget[] = [];
  const notProbed: string[] = [];
  for (const instance of config.instances) {
    if (instance.mode !== 'direct') {
      notProbed.push(`${instance.id}: mode proxy (verify probes engines: list them with mode: direct)`);
      continue;
    }
    const keys = config.engineCredentials.get(instance.id);
    targets.push({ id: instance.id, url: instance.url, apiKey: keys?.apiKey ?? null, instance });
  }
  const pairs: VerifyPair[] = [];
  for (const p of targets) {
    if (p.instance.role !== 'prefill') continue;
    const profile = p.instance.profile;
    if (profile !== 'handoff' && profile !== 'trigger' && profile !== 'bootstrap') continue;
    for (const d of targets) {
      if (d.instance.role !== 'decode' || d.instance.profile !== profile) continue;
      if (!canPair(p.instance, d.instance)) continue;
      pairs.push({ prefill: p, decode: d, profile });
    }
  }
  return { targets, pairs, notProbed };
}

export const pairName = (pair: Pick<VerifyPair, 'prefill' | 'decode'>): string =>
  `${pair.prefill.id} → ${pair.decode.id}`;
