import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { startMotorUp } from './helpers/motor-process.js';

it('motor up starts a P/D cluster, serves the openai client, and stops every process on Ctrl-C', async () => {
  const up = await startMotorUp(['--port', '0', '--time-scale', '0', '--prefill', '1', '--decode', '1']);
  const { baseUrl, lines } = up;
  let exitCode: number | null = null;
  try {
    const client = new OpenAI({ baseURL: baseUrl, apiKey: 'unused', maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: 'motor-sim-7b',
      messages: [{ role: 'user', content: 'Hello!' }],
      max_tokens: 4,
    });
    expect(completion.choices[0]?.message.content).toBeTruthy();
    expect(completion.usage?.completion_tokens).toBe(4);
    // the config names only {url, role} per proxy: models (like engine and capabilities) are discovered
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['motor-sim-7b']);
    expect(lines.join('\n')).toContain('curl -N');
    const dashboard = /Dashboard: (\S+)/.exec(lines.join('\n'))?.[1];
    expect(dashboard).toBe(`${baseUrl.replace(/\/v1$/, '')}/dashboard`);
    expect((await fetch(dashboard!)).headers.get('content-type')).toContain('text/html');
    // the banner's doctor command passes on this default fleet (no KV events: skipped, not drift)
    const doctorUrl = /Doctor: motor doctor --coordinator (\S+)/.exec(lines.join('\n'))?.[1];
    expect(doctorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const doctor = await motorCli('doctor', '--coordinator', doctorUrl!);
    expect(doctor.stdout).toMatch(/event_stream\s+SKIPPED/);
    expect(doctor.stdout).not.toMatch(/DRIFT/);
    expect(doctor.code).toBe(0);
    // pointed at the client port, it is told where the doctor lives
    const wrong = await motorCli('doctor', '--coordinator', baseUrl.replace(/\/v1$/, ''));
    expect(wrong.code).toBe(3); // EXIT_UNAVAILABLE: no doctor at that URL
    expect(wrong.stderr).toMatch(
      /answered 404: this is the client port; the doctor report is GET \/v1\/doctor on the management API/,
    );
  } finally {
    exitCode = await up.interrupt();
  }
  expect(exitCode).toBe(0);
  // Every process (2 sims, 2 proxies, 1 coordinator) is gone: each port refuses connections.
  const urls = [...lines.join('\n').matchAll(/(engine|proxy) (http:\/\/\S+)/g)].map((m) => m[2]!);
  expect(urls).toHaveLength(4);
  for (const url of [...urls, baseUrl.replace(/\/v1$/, '')]) {
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  }
}, 60_000);

function motorCli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = fileURLToPath(new URL('../bin/motor.js', import.meta.url));
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
