import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import type { BenchReport } from '../src/loadgen/json-report.js';
import type { CacheReferences } from '../src/loadgen/cache-references.js';

const MOTOR_BIN = fileURLToPath(new URL('../bin/motor.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MOTOR_BIN, 'bench', ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

/**
 * A small multi-turn trace in Mooncake's format: 3 conversations × 3 turns, all sharing block 0 (a
 * system prompt), each turn one 512-token block longer than the last, turns 200 ms apart in the trace.
 */
function multiTurnTrace(): string {
  const lines: string[] = [];
  for (let turn = 0; turn < 3; turn++)
    for (let c = 0; c < 3; c++) {
      const hash_ids = [0, ...Array.from({ length: turn + 1 }, (_, t) => 100 * (c + 1) + t)];
      lines.push(
        JSON.stringify({
          timestamp: 200 * lines.length,
          input_length: hash_ids.length * 512,
          output_length: 3 + c,
          hash_ids,
        }),
      );
    }
  return lines.join('\n') + '\n';
}

let sim: MotorChild;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'motor-bench-trace-'));
  sim = await spawnMotor(['sim', '--port', '0', '--time-scale', '0']);
});

afterAll(async () => {
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('motor bench --trace (process)', () => {
  it('replays a Mooncake trace against motor sim: cached tokens equal the one-instance infinite-cache reference', async () => {
    const trace = join(dir, 'trace.jsonl');
    writeFileSync(trace, multiTurnTrace());
    const json = join(dir, 'trace.json');
    const { code, stdout, stderr } = await bench([
      ...['--url', `${sim.url}/v1`, '--trace', trace, '--trace-format', 'mooncake', '--time-scale', '0.1'],
      ...['--reference-instances', '1', '--seed', '77', '--no-progress', '--json', json],
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/requests ok\s+9/);
    expect(stdout).toMatch(/ref: infinite cache\s+\d+\.\d %/);
    expect(stdout).toMatch(/ref: pooled LRU\s+\d+\.\d %/);
    expect(stdout).toMatch(/ref: earliest finish\s+\d+\.\d %/);
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    const t = report.targets[0]!;
    expect(t).toMatchObject({ ok: 9, failed: 0, outputTokens: 3 * (3 + 4 + 5) });
    expect(report.settings).toMatchObject({
      workload: 'mooncake-trace',
      traceRecords: 9,
      load: { kind: 'trace', file: trace, format: 'mooncake', timeScale: 0.1 },
      stop: { requests: 9 },
    });
    const refs = report.settings.references as CacheReferences;
    // ample capacity: nothing is evicted, so all three replay the same hits
    const ref = refs.infinite;
    expect(refs.pooledLru).toEqual(ref);
    expect(refs.earliestFinish).toMatchObject(ref);
    // turn 0: conversations 2 and 3 share block 0; turn t: t + 1 blocks of the previous turn
    expect(ref.hitTokens).toBe(512 * (2 + 3 * 2 + 3 * 3));
    // 512 words are 512 simulator tokens: the simulator caches exactly the shared blocks
    expect(t.cachedTokens).toBe(ref.hitTokens);
    // each prompt is its input_length plus the chat template's 11 tokens
    expect(t.promptTokens).toBe(ref.promptTokens + 9 * 11);
    expect(t.referenceHitRates).toEqual({
      infinite: ref.hitRate,
      pooledLru: ref.hitRate,
      earliestFinish: ref.hitRate,
    });
  });

  it('rejects a bad trace line and flags that fight the trace', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"timestamp":0,"input_length":600,"output_length":1,"hash_ids":[1]}\n');
    const url = ['--url', `${sim.url}/v1`];
    expect((await bench([...url, '--trace', bad])).stderr).toMatch(
      /bad\.jsonl: trace line 1: hash_ids has 1 ids, input_length 600 needs ceil\(600\/512\) = 2/,
    );
    expect((await bench([...url, '--trace', bad, '--rate', '3'])).stderr).toMatch(/drop --rate/);
    expect((await bench([...url, '--trace', join(dir, 'none.jsonl')])).stderr).toMatch(/cannot read --trace/);
    expect((await bench([...url, '--reference-instances', '2'])).stderr).toMatch(/needs --trace/);
  });
});
