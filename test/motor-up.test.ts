import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { expect, it } from 'vitest';

const bin = fileURLToPath(new URL('../bin/motor.js', import.meta.url));

it('motor up starts a P/D cluster, serves the openai client, and stops every process on Ctrl-C', async () => {
  const up = spawn(
    process.execPath,
    [bin, 'up', '--port', '0', '--time-scale', '0', '--prefill', '1', '--decode', '1'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  const baseUrl = await new Promise<string>((resolve, reject) => {
    up.once('exit', (code) => reject(new Error(`motor up exited early (${code}):\n${lines.join('\n')}`)));
    createInterface({ input: up.stdout! }).on('line', (line) => {
      lines.push(line);
      const m = /OpenAI base URL: (\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
  });
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
  } finally {
    up.kill('SIGINT');
  }
  expect(await exited).toBe(0);
  // Every process (2 sims, 2 proxies, 1 coordinator) is gone: each port refuses connections.
  const urls = [...lines.join('\n').matchAll(/(engine|proxy) (http:\/\/\S+)/g)].map((m) => m[2]!);
  expect(urls).toHaveLength(4);
  for (const url of [...urls, baseUrl.replace(/\/v1$/, '')]) {
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  }
}, 60_000);
