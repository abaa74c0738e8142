/**
 * Where a many-keys request body costs time (issue 15 finding 7; docs/BENCHMARKS.md "Many-keys bodies").
 *
 * 1. Steps: for a chat body whose extra keys are at the top level or in one nested object, the time
 *    of each pass Motor makes over it: the shape scan (common/json-shape.ts), JSON.parse, request
 *    validation, prompt render, the prefill leg's shaped copy and one leg's serialisation.
 * 2. End to end: one in-process coordinator (direct mode) over a loopback engine that drains each
 *    body unparsed and answers a fixed completion; the longest event-loop stall
 *    (perf_hooks.monitorEventLoopDelay) while one such body is posted, with the key bound at its
 *    default and switched off (`server.maxJsonKeys` 1e9: the passes of the code before the bound).
 *
 *   npx tsx scripts/bench/json-body.ts [--keys 32768,259000,1380000] [--rounds 3]
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { checkJsonShape } from '../../src/common/json-shape.js';
import { createLogger } from '../../src/common/logger.js';
import { validateCoordinatorConfig } from '../../src/config/coordinator-config.js';
import { startCoordinator } from '../../src/coordinator/coordinator.js';
import { prefillShapedBody } from '../../src/coordinator/dispatch/transport/leg-request.js';
import { validateClientRequest } from '../../src/coordinator/apis/openai/request-validation.js';
import { renderPrompt } from '../../src/coordinator/kv-routing/prompt-render.js';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '32768,259000,1380000' },
    rounds: { type: 'string', default: '3' },
  },
});
const KEY_COUNTS = values.keys.split(',').map(Number);
const ROUNDS = Number(values.rounds);

function keysText(n: number): string {
  const parts: string[] = new Array<string>(n);
  for (let i = 0; i < n; i++) parts[i] = `"k${i}":1`;
  return parts.join(',');
}
const HEAD = '"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]';
const SHAPES: Record<string, (n: number) => Buffer> = {
  'top-level keys': (n) => Buffer.from(`{${HEAD},${keysText(n)}}`),
  'one nested object': (n) => Buffer.from(`{${HEAD},"metadata":{${keysText(n)}}}`),
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function timed(f: () => unknown): number {
  const t0 = performance.now();
  f();
  return performance.now() - t0;
}

console.log('## Steps (median ms of %d rounds)', ROUNDS);
console.log('| body | MiB | scan | JSON.parse | validate | render | shaped copy | stringify |');
console.log('| --- | --: | --: | --: | --: | --: | --: | --: |');
for (const n of KEY_COUNTS) {
  for (const [shape, make] of Object.entries(SHAPES)) {
    const raw = make(n);
    const ms: number[][] = [[], [], [], [], [], []];
    for (let r = 0; r < ROUNDS; r++) {
      let value: unknown;
      let client: ReturnType<typeof validateClientRequest> | undefined;
      let shaped: Record<string, unknown> = {};
      ms[0]!.push(timed(() => checkJsonShape(raw, { maxDepth: 512, maxKeys: Infinity })));
      ms[1]!.push(timed(() => (value = JSON.parse(raw.toString('utf8')))));
      ms[2]!.push(timed(() => (client = validateClientRequest('chat', value))));
      ms[3]!.push(timed(() => renderPrompt(client!)));
      ms[4]!.push(timed(() => (shaped = prefillShapedBody(client!.body))));
      ms[5]!.push(timed(() => JSON.stringify(shaped)));
    }
    const cells = ms.map((xs) => median(xs).toFixed(0));
    console.log(`| ${n} keys, ${shape} | ${(raw.length / 2 ** 20).toFixed(1)} | ${cells.join(' | ')} |`);
  }
}

/** An engine that costs the process nothing per body: drains it and answers a fixed completion. */
async function drainingEngine(): Promise<{ url: string; close(): Promise<void> }> {
  const answer = JSON.stringify({
    id: 'c',
    object: 'chat.completion',
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'length' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const log = createLogger('json-body-bench', 'silent');
const sim = await drainingEngine();
console.log('\n## End to end (coordinator and a draining engine in one process; longest event-loop stall)');
console.log('| body | maxJsonKeys | status | longest stall ms |');
console.log('| --- | --- | --: | --: |');
for (const maxJsonKeys of [undefined, 1e9]) {
  const config = validateCoordinatorConfig(
    {
      server: { port: 0, maxBodyBytes: 32 * 2 ** 20, ...(maxJsonKeys ? { maxJsonKeys } : {}) },
      health: { intervalMs: 0 },
      instances: [{ url: sim.url, role: 'union', mode: 'direct', models: ['m'] }],
    },
    {},
  );
  const coordinator = await startCoordinator(config, log);
  for (const n of KEY_COUNTS) {
    const raw = SHAPES['top-level keys']!(n);
    const stalls: number[] = [];
    let status = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const res = await fetch(`${coordinator.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: raw,
      });
      await res.arrayBuffer();
      delay.disable();
      status = res.status;
      stalls.push(delay.max / 1e6);
    }
    const bound = maxJsonKeys === undefined ? `${config.server.maxJsonKeys} (default)` : 'off (1e9)';
    console.log(`| ${n} top-level keys | ${bound} | ${status} | ${median(stalls).toFixed(0)} |`);
  }
  await coordinator.close();
}
await sim.close();
