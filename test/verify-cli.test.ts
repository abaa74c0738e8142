import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import type { VerifyReport } from '../src/engine-verify/verify-result.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';

/**
 * `motor verify` as a user runs it (the built CLI): a config file of direct instances in front of
 * simulators; exit codes per docs/cli.md (0 no drift, 1 drift, 2 bad input, 3 no engine answered).
 */

const bin = fileURLToPath(new URL('../bin/motor.js', import.meta.url));
const log = createLogger('verify-cli-test', 'silent');
const sims: RunningSimulator[] = [];
let dir: string;

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'verify', ...args], { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function fleetFile(name: string, urls: { p: string; d: string }): Promise<string> {
  const instance = (id: string, url: string, role: string) =>
    `  - { id: ${id}, url: ${url}, role: ${role}, mode: direct, kvTransferConfig: { kv_connector: NixlConnector } }`;
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    ['instances:', instance('p', urls.p, 'prefill'), instance('d', urls.d, 'decode')].join('\n'),
  );
  return file;
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

let healthy: string;
let recomputing: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'motor-verify-'));
  const start = (role: 'prefill' | 'decode', faults = {}) =>
    startSimulator(
      { host: '127.0.0.1', port: 0, role, timeScale: 0, kvConnector: 'NixlConnector', faults },
      log,
    );
  const [p, d, bad] = await Promise.all([
    start('prefill'),
    start('decode'),
    start('decode', { ignore_remote_kv: true }),
  ]);
  sims.push(p, d, bad);
  healthy = await fleetFile('healthy', { p: p.url, d: d.url });
  recomputing = await fleetFile('recomputing', { p: p.url, d: bad.url });
}, 60_000);

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
});

describe('motor verify (CLI)', () => {
  it('a healthy pair: exit 0, every check ok or skipped', async () => {
    const r = await cli('--config', healthy);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('no drift found');
    expect(r.stdout).toMatch(/p → d\s+kv_loaded\s+OK\s+46/);
  });

  it('a decode that recomputes: exit 1, the JSON names kv_loaded drift and its fix', async () => {
    const r = await cli('--config', recomputing, '--json', '--probes', '2');
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as VerifyReport;
    expect(report.drift).toBe(true);
    expect(report.bounds).toMatchObject({ probesPerPair: 2, maxTokens: 4 });
    const kv = report.checks.find((c) => c.check === 'kv_loaded')!;
    expect(kv).toMatchObject({ target: 'p → d', verdict: 'drift', fact: 46 });
    expect(kv.fix).toMatch(/did not load the KV/);
  });

  it('a missing config file: exit 2', async () => {
    const r = await cli('--config', join(dir, 'nope.yaml'));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/nope\.yaml/);
  });

  it('no engine answers: exit 3', async () => {
    const [a, b] = [await closedPort(), await closedPort()];
    const file = await fleetFile('down', { p: `http://127.0.0.1:${a}`, d: `http://127.0.0.1:${b}` });
    const r = await cli('--config', file, '--timeout-ms', '5000');
    expect(r.code, r.stdout).toBe(3);
  });
});
