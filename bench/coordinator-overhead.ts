/**
 * Added latency per request of `motor coordinator` (one union instance, direct mode) versus calling
 * the simulator directly, side by side in one run. The simulator runs with `--time-scale 0` so model
 * time is zero and the difference is the coordinator's own cost (extra hop, validation, dispatch,
 * relay). Requests are sequential (concurrency 1) and the two targets alternate round by round;
 * the report gives the median of the per-round medians.
 *
 *   npx tsx bench/coordinator-overhead.ts [--rounds 5] [--requests 200] [--max-tokens 16]
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { spawnMotor } from '../src/cluster/motor-child.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '200' },
    'max-tokens': { type: 'string', default: '16' },
  },
});
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const maxTokens = Number(values['max-tokens']);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function one(pool: Pool, stream: boolean): Promise<number> {
  const body = JSON.stringify({
    model: 'motor-sim-7b',
    messages: [{ role: 'user', content: 'How much latency does a coordinator add per request?' }],
    max_tokens: maxTokens,
    stream,
  });
  const t0 = performance.now();
  const res = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await res.body.text();
  const ms = performance.now() - t0;
  if (res.statusCode !== 200 || (stream && !text.endsWith('data: [DONE]\n\n'))) {
    throw new Error(`unexpected answer ${res.statusCode}: ${text.slice(0, 200)}`);
  }
  return ms;
}

async function round(pool: Pool, stream: boolean): Promise<number> {
  const lat: number[] = [];
  for (let i = 0; i < requests; i++) lat.push(await one(pool, stream));
  return median(lat);
}

const sim = await spawnMotor([
  'sim',
  '--port',
  '0',
  '--role',
  'union',
  '--time-scale',
  '0',
  '--record-max',
  '0',
]);
const dir = await mkdtemp(join(tmpdir(), 'motor-bench-'));
const file = join(dir, 'motor.yaml');
await writeFile(
  file,
  stringify({
    server: { port: 0 },
    instances: [{ url: sim.url, role: 'union', mode: 'direct', models: ['motor-sim-7b'] }],
  }),
);
let coord: Awaited<ReturnType<typeof spawnMotor>> | null = null;
const direct = new Pool(sim.url, { connections: 1 });
let via: Pool | null = null;
try {
  coord = await spawnMotor(['coordinator', '--config', file]);
  via = new Pool(coord.url, { connections: 1 });
  // warm-up (JIT, connections)
  for (let i = 0; i < 200; i++) {
    await one(direct, i % 2 === 0);
    await one(via!, i % 2 === 0);
  }
  const rows: string[] = [];
  for (const stream of [false, true]) {
    const d: number[] = [];
    const c: number[] = [];
    for (let r = 0; r < rounds; r++) {
      d.push(await round(direct, stream));
      c.push(await round(via!, stream));
    }
    const md = median(d);
    const mc = median(c);
    rows.push(
      `${stream ? 'stream    ' : 'non-stream'}  sim direct ${md.toFixed(3)} ms   via coordinator ${mc.toFixed(3)} ms   ` +
        `added ${(mc - md).toFixed(3)} ms/request`,
    );
  }
  console.log(
    `coordinator overhead: ${rounds} rounds × ${requests} sequential requests, max_tokens ${maxTokens}, ` +
      `sim --time-scale 0; median of round medians`,
  );
  for (const row of rows) console.log(row);
} finally {
  await Promise.all([direct.close(), via?.close()]);
  await coord?.stop();
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
}
