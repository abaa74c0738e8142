import { kvConnectorFamily } from '../protocol/connector-table.js';
import type { SchedulableInstance } from './types.js';

/**
 * The facts two instances of a pair must share, each only when both sides name one: the engine kind
 * (one plan name means different wire flows on vLLM and SGLang) and the KV connector (a NIXL prefill's
 * blocks cannot be read by a Mooncake decode). An unnamed fact matches anything.
 */
type PairFacts = Pick<SchedulableInstance, 'engine' | 'kvConnector'>;

/** Whether `a` and `b` may form a pair (the one rule; {@link pairableDecodes} answers it in bulk). */
export function canPair(a: PairFacts, b: PairFacts): boolean {
  return agrees(a.engine, b.engine) && agrees(family(a.kvConnector), family(b.kvConnector));
}

/** Connector names that are one class upstream (`NixlConnector` = `NixlPullConnector`) pair. */
function family(connector: string | undefined): string | undefined {
  return connector === undefined ? undefined : kvConnectorFamily(connector);
}

function agrees(a: string | undefined, b: string | undefined): boolean {
  return a === undefined || b === undefined || a === b;
}

// Key parts that no plan, engine or connector name contains: "named none" and "any value".
const UNNAMED = '\u0000-';
const ANY = '\u0000*';
const key = (plan: string, engine: string, connector: string): string => `${plan}\n${engine}\n${connector}`;

/**
 * "Does some decode share a plan with this prefill and pass {@link canPair}?" for every prefill of a
 * request in O((P + D) × plans), no pair enumerated: each decode enters each of its plans under 4 keys
 * (each fact as named and as "any"); a prefill asks, per plan, at most 4 keys (its facts or "unnamed").
 */
export function pairableDecodes<I extends PairFacts>(
  decodes: readonly I[],
  plansOf: (instance: I) => Iterable<string>,
): (prefill: I) => boolean {
  // The common fleet: every decode names the same facts. One comparison per prefill, no keys built.
  const first = decodes[0];
  if (
    first &&
    decodes.every((d) => d.engine === first.engine && family(d.kvConnector) === family(first.kvConnector))
  ) {
    const plans = new Set<string>();
    for (const d of decodes) for (const plan of plansOf(d)) plans.add(plan);
    return (prefill) => {
      if (!canPair(prefill, first)) return false;
      for (const plan of plansOf(prefill)) if (plans.has(plan)) return true;
      return false;
    };
  }
  const keys = new Set<string>();
  for (const d of decodes) {
    const engine = d.engine ?? UNNAMED;
    const connector = family(d.kvConnector) ?? UNNAMED;
    for (const plan of plansOf(d)) {
      keys.add(key(plan, engine, connector)).add(key(plan, engine, ANY));
      keys.add(key(plan, ANY, connector)).add(key(plan, ANY, ANY));
    }
  }
  return (prefill) => {
    const engines = prefill.engine === undefined ? [ANY] : [prefill.engine, UNNAMED];
    const connectors = prefill.kvConnector === undefined ? [ANY] : [family(prefill.kvConnector)!, UNNAMED];
    for (const plan of plansOf(prefill))
      for (const e of engines) for (const c of connectors) if (keys.has(key(plan, e, c))) return true;
    return false;
  };
}

/** Why plans overlap yet no pair forms: each side's engine kinds and connectors (a failure message). */
export function unpairedReason(prefills: readonly PairFacts[], decodes: readonly PairFacts[]): string {
  const facts = (side: readonly PairFacts[]): string =>
    [...new Set(side.map((i) => `${i.engine ?? 'any engine'} ${i.kvConnector ?? 'any connector'}`))]
      .sort()
      .join(', ');
  return (
    'no prefill/decode pair shares a dispatch plan, engine kind and KV connector ' +
    `(prefill: ${facts(prefills)}; decode: ${facts(decodes)})`
  );
}
