import { readFileSync } from 'node:fs';
import { createProgram } from './program.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

await createProgram(pkg.version).parseAsync(process.argv);
