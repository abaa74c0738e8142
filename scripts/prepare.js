// npm's `prepare` hook: builds dist/ after `npm ci` / `npm install` in a checkout and before `npm pack`.
//
// `npm exec motor` (npx) inside a checkout whose package.json has the `motor` bin installs the checkout
// into npm's npx cache as a link, and npm runs a linked package's `prepare` once more (npm/cli
// workspaces/libnpmexec/lib/index.js `exec`, local bin → `installLinks = false`; workspaces/arborist
// lib/arborist/rebuild.js `#build`, "links should run prepare scripts"; npm 11.19). That would compile
// the whole tree a second time right after `npm ci` did: under npm exec the build is kept when it
// exists, and only made when it is missing. `npm run build` rebuilds on demand.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, URL } from 'node:url';

const built = existsSync(new URL('../dist/cli/main.js', import.meta.url));
if (process.env.npm_command === 'exec' && built) process.exit(0);

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(
  process.execPath,
  [tsc, '-p', fileURLToPath(new URL('../tsconfig.build.json', import.meta.url))],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
