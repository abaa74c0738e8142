import type { SchedulableInstance } from './types.js';

/**
 * The facts two instances of a pair must share, each only when both sides name one: the engine kind
 * (one plan name means different wire flows on vLLM and SGLang) and the KV connector (a NIXL prefill's
 * blocks cannot be read by a Mooncake decode). An unnamed fact matches anything.
 */
type PairFacts = Pick<SchedulableInstance, 'engine' | 'kvConnector'>;

/** Whether `a` and `b` may form a pair (the one rule; {@link pairableDecodes} answers it in bulk). */
export function canPair(a: PairFacts, b: PairFacts): boolean {
  return agrees(a.engine, b.engine) && agrees(a.kvConnector, b.kvConnector);
}

function agrees(a: string | undefined, b: string | undefined): boolean {
  return a === undefined || b === undefined || a === b;
}

// Key parts that no engine or connector name contains: a decode that names no value, and "any value".
const UNNAMED = '\u0000-';
const ANY = '\u0000*';
const key = (engine: string, connector: string): string => `${engine}\n${connector}`;

/**
 * "Does some decode pair with this prefill?" for every prefill of a request in O(P + D): each decode
 * enters its facts under 4 keys (each fact as named and as "any"); a prefill asks at most 4 keys, its
 * facts or "unnamed" per side ({@link canPair} as set lookups, no pair is enumerated).
 */
export function pairableDecodes(decodes: readonly PairFacts[]): (prefill: PairFacts) => boolean {
  const keys = new Set<string>();
  for (const d of decodes) {
    const engine = d.engine ?? UNNAMED;
    const connector = d.kvConnector ?? UNNAMED;
    keys.add(key(engine, connector)).add(key(engine, ANY)).add(key(ANY, connector)).add(key(ANY, ANY));
  }
  return (prefill) => {
    const engines = prefill.engine === undefined ? [ANY] : [prefill.engine, UNNAMED];
    const connectors = prefill.kvConnector === undefined ? [ANY] : [prefill.kvConnector, UNNAMED];
    return engines.some((e) => connectors.some((c) => keys.has(key(e, c))));
  };
}
