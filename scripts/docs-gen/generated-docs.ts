import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createProgram } from '../../src/cli/program.js';
import { renderCliDoc } from './cli-doc.js';
import { renderConfigurationDoc } from './configuration-doc.js';

/** The repository root (this file is scripts/docs-gen/generated-docs.ts). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface GeneratedDoc {
  /** Path relative to the repository root (listed in .prettierignore: the generator owns its format). */
  path: string;
  content: string;
}

const version = (): string =>
  (JSON.parse(readFileSync(`${REPO_ROOT}package.json`, 'utf8')) as { version: string }).version;

/** Every generated doc, rendered in memory (deterministic: no clock, no environment). */
export function generatedDocs(): GeneratedDoc[] {
  return [
    { path: 'docs/configuration.md', content: `${renderConfigurationDoc()}\n` },
    { path: 'docs/cli.md', content: `${renderCliDoc(createProgram(version()))}\n` },
  ];
}
