/**
 * `npm run docs:screenshot`: starts a local P/D cluster (the `motor up` machinery: 2 prefill + 2
 * decode simulators behind engine proxies, handoff), drives mixed streaming traffic at it, and writes
 * a screenshot of the live dashboard to docs/dashboard.png (headless Debian chromium).
 *
 *   npm run docs:screenshot [-- --out docs/dashboard.png --seconds 12]
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { startLocalCluster } from '../src/cluster/local-cluster.js';
import { launchChromium } from '../test/helpers/chromium.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: 'docs/dashboard.png' },
    seconds: { type: 'string', default: '12' },
    concurrency: { type: 'string', default: '6' },
  },
});
const model = 'motor-sim-7b';
const trafficMs = Number(values.seconds) * 1000;

process.stdout.write('starting a 2 prefill + 2 decode cluster…\n');
const cluster = await startLocalCluster({
  prefill: 2,
  decode: 2,
  union: 0,
  profile: 'handoff',
  host: '127.0.0.1',
  port: 0,
  model,
  timeScale: 0.5,
  direct: false,
  simArgs: [],
});
const chromium = await launchChromium();
try {
  // Health probes make the instances routable shortly after start: wait for /ready, not for time.
  for (let i = 0; (await fetch(`${cluster.baseUrl}/ready`)).status !== 200; i++) {
    if (i > 600) throw new Error('the cluster did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  const words = 'prefill decode handoff cache block token stream attention layer batch'.split(' ');
  let sent = 0;
  let failed = 0;
  const until = Date.now() + trafficMs;
  const worker = async (w: number): Promise<void> => {
    while (Date.now() < until) {
      const n = 20 + ((sent * 37 + w * 11) % 400);
      const prompt = Array.from({ length: n }, (_, i) => words[(i * 7 + sent) % words.length]).join(' ');
      sent++;
      try {
        const res = await fetch(`${cluster.baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model,
            messages: [{ role: 'user', content: prompt }],
            max_tokens: 16 + (sent % 5) * 12,
            stream: true,
          }),
        });
        await res.text();
      } catch (err) {
        failed++;
        process.stderr.write(`request failed: ${(err as Error).message} ${String((err as Error).cause)}\n`);
      }
    }
  };
  const traffic = Promise.all(Array.from({ length: Number(values.concurrency) }, (_, w) => worker(w)));
  const page = await chromium.context.newPage();
  await page.goto(`${cluster.baseUrl}/dashboard?interval=500`);
  // Screenshot while traffic still runs (load bars, in-flight) once enough requests are on the page.
  await page.waitForFunction(
    `document.body.dataset.ready === 'true' && Number(document.body.dataset.requests) >= 25`,
    undefined,
    { timeout: trafficMs + 60_000 },
  );
  await page.waitForFunction(`document.querySelectorAll('#recent .request-row').length >= 12`);
  const png = await page.screenshot({ fullPage: true });
  await writeFile(values.out!, png);
  process.stdout.write(`wrote ${values.out} (${png.length} bytes); finishing traffic…\n`);
  await traffic;
  process.stdout.write(`${sent} requests sent, ${failed} failed on the client side\n`);
} finally {
  await chromium.close();
  await cluster.stop();
}
