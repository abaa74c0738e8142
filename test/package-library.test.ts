import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  copyFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';

/**
 * Issue 18 item 1: the package as `npm pack` builds it, installed into a project of its own, serves a
 * chat request from a plain node:http app through both exports, and its published types check.
 *
 * Install: the tarball is unpacked into `<tmp>/node_modules/motor-pd` (what `npm install <tarball>` puts
 * there) and each of its declared `dependencies` is linked from this repo's node_modules, because the
 * machine is offline and npm's cache does not hold them (`npm install --offline` fails with
 * ENOTCACHED). Only declared dependencies are linked, so an import of anything else from dist/ fails
 * here as it would for a user. npm itself never touches these directories (its prune would follow the
 * links into this repo).
 */
const ROOT = resolve(import.meta.dirname, '..');
const FIXTURE = join(ROOT, 'test/fixtures/library-app/app.ts');
let dir = '';

function link(name: string, from = ROOT): void {
  const target = join(from, 'node_modules', name);
  if (!existsSync(target)) throw new Error(`${name} is not installed in ${from}`);
  const path = join(dir, 'node_modules', name);
  mkdirSync(dirname(path), { recursive: true });
  symlinkSync(target, path, 'dir');
}

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/index.js')))
    throw new Error('run `npm run build` first (the package is dist/)');
  dir = mkdtempSync(join(tmpdir(), 'motor-pack-'));
  // --ignore-scripts: `prepare` would rebuild; the test runs against the build `npm test` made
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], {
      cwd: ROOT,
      encoding: 'utf8',
    }),
  ) as { filename: string; files: { path: string }[] }[];
  const { filename, files } = packed[0]!;
  const paths = files.map((f) => f.path);
  expect(paths).toEqual(
    expect.arrayContaining(['dist/index.d.ts', 'dist/testing.d.ts', 'dist/index.js', 'bin/motor.js']),
  );
  expect(
    paths.filter(
      (p) => p.endsWith('.test.js') || p.endsWith('.map') || p.startsWith('src/') || p.startsWith('test/'),
    ),
  ).toEqual([]);
  mkdirSync(join(dir, 'node_modules/motor-pd'), { recursive: true });
  execFileSync('tar', [
    '-xzf',
    join(dir, filename),
    '-C',
    join(dir, 'node_modules/motor-pd'),
    '--strip-components=1',
  ]);
  const pkg = JSON.parse(readFileSync(join(dir, 'node_modules/motor-pd/package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  for (const name of Object.keys(pkg.dependencies)) link(name);
  link('@types/node'); // the app's own dev dependency, for the type check
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        // the app's use of the types is checked; @ts-expect-error lines in it fail if they are `any`
        skipLibCheck: true,
        types: ['node'],
        outDir: 'out',
      },
      files: ['app.ts'],
    }),
  );
  copyFileSync(FIXTURE, join(dir, 'app.ts'));
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('type-checks an app against the published .d.ts and serves a chat request through motor-pd and motor-pd/testing', () => {
  // tsc checks the app (and the package's declarations) and writes plain JavaScript
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir], {
    cwd: dir,
    encoding: 'utf8',
  });
  const out = execFileSync(process.execPath, [join(dir, 'out/app.js')], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, MOTOR_LOG_LEVEL: 'error' },
    timeout: 60_000,
  });
  const result = JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
  expect(result).toEqual({ status: 200, content: expect.any(String), handoff: true });
}, 120_000);
