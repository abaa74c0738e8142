import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generatedDocs, REPO_ROOT } from '../scripts/docs-gen/generated-docs.js';

/** docs/configuration.md and docs/cli.md are generated: the files on disk must match a fresh render. */
describe('generated docs', () => {
  const docs = generatedDocs();

  it.each(docs.map((d) => [d.path, d.content]))('%s is up to date', (path, content) => {
    const onDisk = readFileSync(`${REPO_ROOT}${path}`, 'utf8');
    expect(onDisk === content, `${path} is stale: run \`npm run docs:gen\` and commit the result`).toBe(true);
  });

  it('renders the same text twice (no clock, no environment in the output)', () => {
    expect(generatedDocs()).toEqual(docs);
  });
});
