import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { startMotorUp } from './helpers/motor-process.js';

/**
 * `motor up --config/--set` reach the coordinator, and union instances beside P/D pairs take part:
 * short prompts go to them (issue 18 item 4; before, `--union 1` added an instance nothing used).
 */
it('motor up passes --config and --set to the coordinator and routes short prompts to union instances', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'motor-up-settings-'));
  const config = join(dir, 'motor.yaml');
  writeFileSync(config, 'server:\n  apiKeys: [from-the-file]\n');
  const up = await startMotorUp([
    ...['--port', '0', '--time-scale', '0', '--prefill', '1', '--decode', '1', '--union', '1'],
    ...['--config', config, '--set', 'scheduling.disaggregation.shortPromptTokens=32'],
  ]);
  let exitCode: number | null = null;
  try {
    const chat = (content: string, key: string): Promise<Response> =>
      fetch(`${up.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'motor-sim-7b', messages: [{ role: 'user', content }], max_tokens: 2 }),
      });
    expect((await chat('hi', 'wrong-key')).status).toBe(401); // the file's server.apiKeys
    expect((await chat('hi', 'from-the-file')).status).toBe(200);
    expect((await chat('a long prompt, '.repeat(40), 'from-the-file')).status).toBe(200);
    const metrics = await (await fetch(`${up.baseUrl.replace(/\/v1$/, '')}/metrics`)).text();
    // the short prompt on the union instance, the long one (over --set's 32 tokens) on the P/D pair
    expect(metrics).toMatch(/motor_scheduling_decisions_total\{kind="single",plan="single"\} 1/);
    expect(metrics).toMatch(/motor_scheduling_decisions_total\{kind="pd",plan="handoff"\} 1/);
  } finally {
    exitCode = await up.interrupt();
    rmSync(dir, { recursive: true, force: true });
  }
  expect(exitCode).toBe(0);
}, 60_000);
