/**
 * Throughput of the simulator itself (`npm run bench:sim`): starts `motor sim --time-scale 0` as a
 * child process (its own core) and drives it with an undici Pool at fixed concurrency.
 *
 *   npx tsx scripts/bench/simulator-throughput.ts [--seconds 5] [--concurrency 64] [--stream-tokens 256]
 *
 * Reports short non-stream requests/s and streamed tokens/s (SSE chunks received).
 */
import { spawnMotor } from '../../src/cluster/motor-child.js';
import { Pool } from 'undici';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

async function drive(
  pool: Pool,
  seconds: number,
  concurrency: number,
  body: string,
  onBody: (text: string) => number,
): Promise<{ requests: number; units: number; elapsedS: number }> {
  const end = performance.now() + seconds * 1000;
  let requests = 0;
  let units = 0;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const res = await pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text}`);
      requests++;
      units += onBody(text);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { requests, units, elapsedS: (performance.now() - t0) / 1000 };
}

const seconds = arg('seconds', 5);
const concurrency = arg('concurrency', 64);
const streamTokens = arg('stream-tokens', 256);
const sim = await spawnMotor(['sim', '--time-scale', '0', '--record-max', '0', '--max-num-seqs', '1024']);
const pool = new Pool(sim.url, { connections: concurrency, pipelining: 1 });
try {
  const short = JSON.stringify({
    model: 'motor-sim-7b',
    messages: [{ role: 'user', content: 'Say hello in a few words.' }],
    max_tokens: 8,
  });
  await drive(pool, 1, concurrency, short, () => 0); // warm-up
  const a = await drive(pool, seconds, concurrency, short, () => 0);
  console.log(
    `non-stream (max_tokens 8, concurrency ${concurrency}): ${Math.round(a.requests / a.elapsedS)} req/s`,
  );
  const streamBody = JSON.stringify({
    model: 'motor-sim-7b',
    messages: [{ role: 'user', content: 'Tell me a long story.' }],
    max_tokens: streamTokens,
    stream: true,
  });
  const b = await drive(pool, seconds, Math.min(concurrency, 16), streamBody, (t) => {
    let n = 0;
    for (let i = t.indexOf('"content":"'); i >= 0; i = t.indexOf('"content":"', i + 1)) n++;
    return n - 1; // minus the role chunk
  });
  console.log(
    `stream (max_tokens ${streamTokens}, concurrency ${Math.min(concurrency, 16)}): ${Math.round(b.units / b.elapsedS)} tokens/s, ${Math.round(b.requests / b.elapsedS)} req/s`,
  );
} finally {
  await pool.close();
  await sim.stop();
}
