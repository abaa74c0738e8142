import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { nearest } from '../src/common/did-you-mean.js';
import { coordinatorConfigSchema, validateCoordinatorConfig } from '../src/config/coordinator-config.js';

/**
 * Every YAML snippet in README.md and docs/*.md that is a Motor coordinator config (a mapping whose
 * top-level keys are all config sections, or near misses of them) must pass the config loader: an example with a renamed or
 * deprecated key is the first thing a new user copies.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const files = [
  'README.md',
  ...readdirSync(`${root}docs`)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const SECTIONS = new Set(Object.keys(coordinatorConfigSchema.shape));

function snippets(): [string, string][] {
  const out: [string, string][] = [];
  for (const file of files) {
    const text = readFileSync(`${root}${file}`, 'utf8');
    for (const match of text.matchAll(/^```ya?ml\n([\s\S]*?)^```/gm)) {
      const line = text.slice(0, match.index).split('\n').length;
      out.push([`${file}:${line}`, match[1]!]);
    }
  }
  return out;
}

const configs = snippets().filter(([, yaml]) => {
  let value: unknown;
  try {
    value = parseYaml(yaml);
  } catch {
    return false;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  // a misspelled section (`instance:`) still marks a Motor config: the loader must reject it
  const section = (k: string) => SECTIONS.has(k) || nearest(k, SECTIONS) !== undefined;
  return keys.length > 0 && keys.every(section);
});

describe('YAML config snippets in the docs load with the config schema', () => {
  it('finds the snippets (the filter is not vacuous)', () => {
    expect(configs.length).toBeGreaterThan(5);
  });

  it.each(configs)('%s', (_where, yaml) => {
    // the secrets a snippet names by `*Env` are set, as the deployment sets them
    const env = new Proxy({} as NodeJS.ProcessEnv, { get: () => 'Zq4vN8kT2pW6yR1mX7cB3hJ9' });
    expect(() => validateCoordinatorConfig(parseYaml(yaml), env)).not.toThrow();
  });
});
