/**
 * `npm run docs:gen`: writes docs/configuration.md (from the config schema) and docs/cli.md (from the
 * commander definitions). test/docs-gen.test.ts fails when either file on disk is stale.
 */
import { writeFile } from 'node:fs/promises';
import { generatedDocs, REPO_ROOT } from './docs-gen/generated-docs.js';

for (const doc of generatedDocs()) {
  await writeFile(`${REPO_ROOT}${doc.path}`, doc.content);
  process.stdout.write(`wrote ${doc.path}\n`);
}
