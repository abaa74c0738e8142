import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';

/**
 * Every expected start-up failure of the built CLI is ONE line on stderr, `motor <command>: …`, with
 * no stack trace and a non-zero exit (issue 18 item 3). Usage errors: the error and a one-line hint.
 */
const MOTOR_BIN = fileURLToPath(new URL('../bin/motor.js', import.meta.url));

function motor(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MOTOR_BIN, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

let busy: Server;
let busyPort: number;
let closedPort: number;
let dir: string;

async function listening(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

beforeAll(async () => {
  busy = await listening();
  busyPort = (busy.address() as AddressInfo).port;
  const closed = await listening();
  closedPort = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  dir = mkdtempSync(join(tmpdir(), 'motor-startup-errors-'));
  writeFileSync(join(dir, 'bad.yaml'), 'server: [unclosed\n');
  writeFileSync(join(dir, 'fleet.yaml'), 'instances: []\n');
  const direct = (role: string, extra = '') =>
    `  - { url: "http://127.0.0.1:${closedPort}", role: ${role}, mode: direct${extra} }\n`;
  writeFileSync(
    join(dir, 'prefill-only.yaml'),
    'instances:\n' + direct('prefill', ', kvTransferConfig: { kv_connector: NixlConnector }'),
  );
  writeFileSync(join(dir, 'no-connector.yaml'), 'instances:\n' + direct('prefill') + direct('decode'));
});

afterAll(async () => {
  await new Promise((resolve) => busy.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const BUSY = /^port (\d+) on 127\.0\.0\.1 is already in use/;

// [what, args (BUSY_PORT, CLOSED_PORT and DIR substituted), the line after `motor <command>: `, exit code]
const ROWS: [string, string[], RegExp, number][] = [
  ['coordinator: busy port', ['coordinator', '--port', 'BUSY_PORT'], /in use \(server\.port\)$/, 3],
  [
    'coordinator: busy management port',
    ['coordinator', '--port', '0', '--set', 'management.port=BUSY_PORT'],
    /in use \(management\.port\)$/,
    3,
  ],
  ['sim: busy port', ['sim', '--port', 'BUSY_PORT'], BUSY, 3],
  [
    'sim: busy SGLang bootstrap port',
    ['sim', '--port', '0', '--engine', 'sglang', '--role', 'prefill', '--bootstrap-port', 'BUSY_PORT'],
    /in use \(--bootstrap-port\)$/,
    3,
  ],
  [
    'engine-proxy: busy port',
    ['engine-proxy', '--engine-url', 'http://127.0.0.1:1', '--role', 'union', '--port', 'BUSY_PORT'],
    BUSY,
    3,
  ],
  ['up: busy port, checked before any child', ['up', '--port', 'BUSY_PORT'], /in use \(coordinator/, 3],
  [
    'coordinator: missing config file',
    ['coordinator', '-c', 'DIR/none.yaml'],
    /^config file \S+none\.yaml: not found$/,
    2,
  ],
  ['coordinator: config file is a directory', ['coordinator', '-c', 'DIR'], /: is a directory$/, 2],
  [
    'coordinator: invalid YAML',
    ['coordinator', '-c', 'DIR/bad.yaml'],
    /^config file \S+bad\.yaml: invalid YAML at line \d+, column \d+: /,
    2,
  ],
  [
    'coordinator: invalid config, every problem',
    ['coordinator', '--set', 'server.port=abc', '--set', 'nope=1'],
    /^invalid config: server\.port: .*; \(root\): unknown key\(s\) 'nope'$/,
    2,
  ],
  [
    'coordinator: unreachable etcd',
    [
      'coordinator',
      '--port',
      '0',
      '--set',
      'registry.store=etcd',
      '--set',
      'registry.endpoints=[http://127.0.0.1:CLOSED_PORT]',
    ],
    /^cannot reach etcd at http:\/\/127\.0\.0\.1:\d+/,
    3,
  ],
  ['up: missing config file', ['up', '--config', 'DIR/none.yaml'], /^config file \S+: not found$/, 2],
  ['up: invalid --set', ['up', '--set', 'scheduler.policy=nope'], /^invalid config: scheduler\.policy: /, 2],
  ['up: instances are its own', ['up', '--config', 'DIR/fleet.yaml'], /instances are motor up's/, 2],
  [
    'up: no instances',
    ['up', '--prefill', '0', '--decode', '0', '--union', '0'],
    /^no instances requested/,
    2,
  ],
  ['up: decode alone', ['up', '--prefill', '0', '--decode', '2'], /^--decode alone cannot serve/, 2],
  ['classify: missing file', ['classify', 'DIR/none.json'], /^engine config \S+: not found$/, 2],
  [
    'coordinator: a direct prefill-only fleet that can never route',
    ['coordinator', '--port', '0', '-c', 'DIR/prefill-only.yaml'],
    /^this fleet can never route: no decode instance .*prefill-only fleet.*none can register/,
    2,
  ],
  [
    'coordinator: direct instances with no connector name the key to set',
    ['coordinator', '--port', '0', '-c', 'DIR/no-connector.yaml'],
    /^this fleet can never route: .*set the instance's kvTransferConfig or dispatchProfile/,
    2,
  ],
  [
    'coordinator: its port is checked before the fleet is',
    ['coordinator', '--port', 'BUSY_PORT', '-c', 'DIR/prefill-only.yaml'],
    /in use \(server\.port\)$/,
    3,
  ],
];

describe('start-up errors are one line with a non-zero exit', () => {
  it.each(ROWS)('%s', async (_what, args, pattern, exitCode) => {
    const run = await motor(
      args.map((a) =>
        a
          .replace('BUSY_PORT', String(busyPort))
          .replace('CLOSED_PORT', String(closedPort))
          .replace('DIR', dir),
      ),
    );
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines, run.stderr).toHaveLength(1);
    const prefix = `motor ${args[0]}: `;
    expect(lines[0]!.startsWith(prefix), run.stderr).toBe(true);
    expect(lines[0]!.slice(prefix.length)).toMatch(pattern);
    expect(run.code).toBe(exitCode);
    if (args[0] === 'up') expect(run.stdout).not.toContain('Starting'); // refused before any child
  });

  it.each([
    [['sim', '--role', 'both'], "'motor sim --help'"],
    [['engine-proxy', '--engine-url', 'http://127.0.0.1:1', '--role', 'both'], "'motor engine-proxy --help'"],
    [['up', '--prefill', 'x'], "'motor up --help'"],
    [['nope'], "'motor --help'"],
  ])('usage error %o: the error and a one-line hint, not the whole help', async (args, hint) => {
    const run = await motor(args);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^error: /);
    expect(lines[1]).toContain(hint);
    expect(run.code).toBe(2); // bad input, as every other command's (docs/cli.md "Exit codes")
  });
});

it('motor coordinator warns once on an empty fleet it can never fill', async () => {
  const empty = await spawnMotor(['coordinator', '--port', '0']);
  const withManagement = await spawnMotor(['coordinator', '--port', '0', '--set', 'management.port=0'], {
    waitFor: ['management'],
  });
  try {
    const warned = (c: MotorChild) =>
      c.logs.some((l) => l.level === 40 && /^empty fleet/.test(String(l.msg)));
    expect(warned(empty)).toBe(true);
    expect(warned(withManagement)).toBe(false); // instances can still register
  } finally {
    await Promise.all([empty.stop(), withManagement.stop()]);
  }
});
