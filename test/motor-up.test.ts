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
