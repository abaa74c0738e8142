import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from '../src/coordinator/coordinator.js';
import type { DoctorReport } from '../src/coordinator/doctor/doctor.js';
import { QWEN3_DIR } from '../src/model-tokenizer/testing/index.js';
import type { KvEventsPublisher } from '../src/simulator/kv-events-publisher.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { post } from '../src/simulator/testing/index.js';

/**
 * `motor doctor` end to end (issue 17 item 4, Done-when): a simulator tokenises with Qwen3's own
 * tokenizer and chat template, hashes 16-token blocks the vLLM way (sha256, seed '0') and publishes
 * KV events; coordinators subscribe to it with a `kvHash` group that matches, one with a wrong
 * `blockSize`, and one whose tokenizer directory carries a different chat template. The doctor route
 * (management port) and the CLI report ok for the first, drift with the fix for the others.
 */

const MODEL = 'qwen3';
const BLOCK = 16;
const log = createLogger('doctor-test', 'silent');
const bin = fileURLToPath(new URL('../bin/motor.js', import.meta.url));

let sim: RunningSimulator;
const running: RunningCoordinator[] = [];
const publisher = () => sim.core.cache.listener as KvEventsPublisher;

/** Qwen3's files with a chat template that differs from the engine's by one newline per message. */
function wrongTemplateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'motor-doctor-template-'));
  symlinkSync(join(QWEN3_DIR, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  const config = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  config.chat_template =
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' }}{% endfor %}" +
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  return dir;
}

async function coordinator(group: {
  blockSize?: number;
  tokenizerPath?: string;
}): Promise<RunningCoordinator> {
  const config = validateCoordinatorConfig({
    server: { port: 0 },
    instances: [
      {
        id: 'e0',
        url: sim.url,
        role: 'union',
        mode: 'direct',
        models: [MODEL],
        kvEvents: { endpoint: sim.kvEvents!.endpoint },
      },
    ],
    kvHash: {
      groups: [
        {
          name: 'qwen3',
          models: [MODEL],
          tokenizer: { path: group.tokenizerPath ?? QWEN3_DIR },
          blockHash: { algo: 'sha256', blockSize: group.blockSize ?? BLOCK, seed: '0' },
        },
      ],
    },
    scheduling: { union: { scorers: [{ type: 'precise-prefix' }], picker: { type: 'max-score' } } },
    health: { intervalMs: 0 },
    observability: { accessLog: false },
    management: { port: 0, host: '127.0.0.1' },
  });
  const c = await startCoordinator(config, log);
  running.push(c);
  // ZeroMQ subscriptions take effect asynchronously: store probes until the hub has a batch.
  for (let probe = 0; probe < 500 && c.kvEvents!.status()[0]?.lastSeq == null; probe++) {
    const prompt = Array.from({ length: BLOCK + 1 }, (_, k) => 60_000 + 100 * probe + k + running.length * 7);
    await post(sim.url, '/v1/completions', { model: MODEL, prompt, max_tokens: 1 });
  }
  await synced(c);
  return c;
}

/** Resolves once the coordinator's index applied every batch the simulator published. */
async function synced(c: RunningCoordinator): Promise<void> {
  for (let turn = 0; turn < 20_000; turn++) {
    if (c.kvEvents!.status()[0]?.lastSeq === publisher().published - 1n) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error('KV event index never caught up');
}

async function doctorOf(c: RunningCoordinator): Promise<DoctorReport> {
  const res = await fetch(`${c.managementUrl}/v1/doctor`);
  expect(res.status).toBe(200);
  return (await res.json()) as DoctorReport;
}

const verdicts = (r: DoctorReport) =>
  Object.fromEntries(r.instances[0]!.checks.map((c) => [c.check, c.verdict]));
const check = (r: DoctorReport, name: string) => r.instances[0]!.checks.find((c) => c.check === name)!;

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'doctor', ...args], { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  sim = await startSimulator(
    {
      timeScale: 0,
      model: MODEL,
      blockSize: BLOCK,
      tokenizer: QWEN3_DIR,
      hashSeed: '0',
      kvEventsEndpoint: 'tcp://127.0.0.1:*',
    },
    log,
  );
}, 60_000);

afterAll(async () => {
  for (const c of running) await c.close();
  await sim?.close();
});

describe('motor doctor (simulator publishing vLLM block hashes)', () => {
  it('reports ok on a matching fleet, cached tokens included, and the CLI exits 0', async () => {
    const c = await coordinator({});
    const messages: Array<{ role: string; content: string }> = [
      {
        role: 'system',
        content: 'You are a support agent for a storage product. Answer briefly. '.repeat(6),
      },
    ];
    for (let turn = 0; turn < 3; turn++) {
      messages.push({ role: 'user', content: `Question ${turn}: how do I restore a file?` });
      await synced(c);
      const r = await post(c.url, '/v1/chat/completions', { model: MODEL, messages, max_tokens: 4 });
      expect(r.status).toBe(200);
      messages.push({ role: 'assistant', content: r.json.choices[0].message.content as string });
    }
    const report = await doctorOf(c);
    expect(verdicts(report)).toEqual({
      tokenizer: 'ok',
      chat_template: 'ok',
      block_size: 'ok',
      block_hashes: 'ok',
      event_stream: 'ok',
      cached_tokens: 'ok',
    });
    expect(report.drift).toBe(false);
    expect(check(report, 'chat_template').detail).toMatch(/identical to the engine's \(POST \/tokenize\)/);
    expect(check(report, 'cached_tokens').detail).toBe('3 of 3 recent requests predicted exactly');
    const run = await cli('--coordinator', c.managementUrl!);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/e0\s+block_hashes\s+OK/);
    expect(run.stdout).toMatch(/no drift found/);
    expect(run.code).toBe(0);
  }, 120_000);

  it('finds a wrong block size, names the fix, and the CLI exits 1', async () => {
    const c = await coordinator({ blockSize: 32 });
    const report = await doctorOf(c);
    expect(report.drift).toBe(true);
    expect(check(report, 'block_size')).toMatchObject({
      verdict: 'drift',
      detail: 'Motor hashes 32-token blocks, the engine 16 (BlockStored events)',
      fix: "set kvHash.groups 'qwen3' blockHash.blockSize to 16 (the engine's --block-size)",
    });
    expect(check(report, 'block_hashes')).toMatchObject({
      verdict: 'drift',
      fix: "set kvHash.groups 'qwen3' blockHash.algo to sha256 and blockSize to 16",
    });
    expect(verdicts(report)).toMatchObject({ tokenizer: 'ok', chat_template: 'ok', event_stream: 'ok' });
    const run = await cli('--coordinator', c.managementUrl!);
    expect(run.stdout).toMatch(/e0\s+block_size\s+DRIFT/);
    expect(run.stdout).toContain("fix e0 block_size: set kvHash.groups 'qwen3' blockHash.blockSize to 16");
    expect(run.code).toBe(1);
    const json = await cli('--coordinator', c.managementUrl!, '--json');
    expect((JSON.parse(json.stdout) as DoctorReport).drift).toBe(true);
    expect(json.code).toBe(1);
  }, 120_000);

  it('finds a wrong chat template (the tokenizer itself matches)', async () => {
    const c = await coordinator({ tokenizerPath: wrongTemplateDir() });
    const report = await doctorOf(c);
    expect(report.drift).toBe(true);
    expect(verdicts(report)).toMatchObject({
      tokenizer: 'ok',
      chat_template: 'drift',
      block_size: 'ok',
      block_hashes: 'ok',
    });
    expect(check(report, 'chat_template').detail).toMatch(/first difference at token \d+/);
    expect(check(report, 'chat_template').fix).toMatch(/chat template/);
  }, 120_000);

  it('the CLI says in one line when the coordinator cannot be reached', async () => {
    const run = await cli('--coordinator', 'http://127.0.0.1:1');
    expect(run.code).toBe(3); // EXIT_UNAVAILABLE: the coordinator is needed and cannot be reached
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/^motor doctor: http:\/\/127\.0\.0\.1:1\/v1\/doctor: /);
  });
});
