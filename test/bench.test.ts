import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import type { BenchReport } from '../src/loadgen/json-report.js';
import { xmlProblem } from '../src/loadgen/well-formed-xml.js';

const MOTOR_BIN = fileURLToPath(new URL('../bin/motor.js', import.meta.url));

/** Runs the built `motor bench` as a user would; resolves with its exit code and output. */
function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MOTOR_BIN, 'bench', ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

let simA: MotorChild;
let simB: MotorChild;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'motor-bench-'));
  [simA, simB] = await Promise.all([
    spawnMotor(['sim', '--port', '0', '--time-scale', '0']),
    spawnMotor(['sim', '--port', '0', '--time-scale', '0', '--model', 'other-model']),
  ]);
});

afterAll(async () => {
  await Promise.all([simA?.stop(), simB?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

describe('motor bench (process)', () => {
  it('runs a fixed number of requests against motor sim and writes a JSON report', async () => {
    const json = join(dir, 'report.json');
    const args = [
      '--url',
      `${simA.url}/v1`,
      '--requests',
      '30',
      '--concurrency',
      '4',
      '--warmup',
      '4',
      '--max-tokens',
      '8',
      '--seed',
      '42',
      '--json',
      json,
    ];
    const { code, stdout, stderr } = await bench(args);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/TTFT p50 ms/);
    expect(stdout).toMatch(/requests ok\s+30/);
    expect(stderr).toMatch(/report written to/);
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    expect(report.report).toBe('motor-bench');
    expect(report.argv).toEqual(['bench', ...args]);
    expect(report.command).toBe(`motor bench ${args.join(' ')}`);
    expect(report.environment).toMatchObject({ node: process.version, cpuCount: expect.any(Number) });
    expect(report.settings).toMatchObject({
      workload: 'short-chat',
      seed: 42,
      maxTokens: 8,
      load: { kind: 'closed', concurrency: 4 },
      stop: { requests: 30 },
      warmup: { requests: 4 },
      stream: true,
    });
    expect(report.targets).toHaveLength(1);
    const t = report.targets[0]!;
    expect(t).toMatchObject({
      name: 'target',
      model: 'motor-sim-7b',
      requests: 30,
      ok: 30,
      failed: 0,
      outputTokens: 240,
      errors: {},
    });
    expect(t.promptTokens).toBeGreaterThan(30 * 20);
    expect(t.ttftMs.count).toBe(30);
    expect(t.ttftMs.p50).toBeGreaterThan(0);
    expect(t.ttftMs.p99).toBeLessThanOrEqual(t.e2eMs.max);
    expect(t.requestsPerS).toBeGreaterThan(0);
  });

  it('shared-prefix: later turns hit the prefix cache of the simulator', async () => {
    const json = join(dir, 'shared.json');
    const { code, stderr } = await bench([
      '--url',
      `${simA.url}/v1`,
      '--workload',
      'shared-prefix',
      '--conversations',
      '2',
      '--turns',
      '3',
      '--prompt-tokens',
      '300',
      '--requests',
      '12',
      '--concurrency',
      '2',
      '--max-tokens',
      '4',
      '--no-progress',
      '--json',
      json,
    ]);
    expect(code, stderr).toBe(0);
    expect(stderr).toBe('');
    const t = (JSON.parse(readFileSync(json, 'utf8')) as BenchReport).targets[0]!;
    expect(t.ok).toBe(12);
    expect(t.prefixCacheHitRate).toBeGreaterThan(0.5);
  });

  it('--compare runs two sims with the same workload and writes a well-formed SVG chart', async () => {
    const json = join(dir, 'compare.json');
    const svg = join(dir, 'compare.svg');
    const { code, stdout, stderr } = await bench([
      '--compare',
      `alpha=${simA.url}/v1,beta=${simB.url}/v1`,
      '--requests',
      '12',
      '--concurrency',
      '3',
      '--max-tokens',
      '4',
      '--no-stream',
      '--json',
      json,
      '--svg',
      svg,
      '--title',
      'alpha vs beta',
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/alpha\s+beta\s+÷alpha/);
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    expect(report.targets.map((t) => [t.name, t.model, t.ok])).toEqual([
      ['alpha', 'motor-sim-7b', 12],
      ['beta', 'other-model', 12],
    ]);
    // Same seed and workload → the same prompts at both targets.
    expect(report.targets[0]!.promptTokens).toBe(report.targets[1]!.promptTokens);
    const text = readFileSync(svg, 'utf8');
    expect(xmlProblem(text)).toBeNull();
    expect(text).toContain('alpha vs beta');
    expect(text).toContain('>alpha<');
    expect(text).toContain('>beta<');
  });

  it('reports errors by kind and exits 1 when a target answered nothing', async () => {
    const { code, stdout } = await bench([
      '--url',
      `${simA.url}/v1`,
      '--model',
      'no-such-model',
      '--requests',
      '3',
      '--no-progress',
    ]);
    expect(code).toBe(1);
    expect(stdout).toMatch(/http_404\s+×3/);
  });

  it('rejects bad flags', async () => {
    expect((await bench(['--url', `${simA.url}/v1`, '--rate', '5', '--concurrency', '2'])).stderr).toMatch(
      /exclusive/,
    );
    expect((await bench(['--requests', '3'])).stderr).toMatch(/give a target/);
    expect((await bench(['--url', 'ftp://x'])).stderr).toMatch(/not an http/);
    expect((await bench(['--url', `${simA.url}/v1`, '--duration', 'soon'])).stderr).toMatch(/duration/);
  });
});
