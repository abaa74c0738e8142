/**
 * The engine proxy's CPU per handoff prefill leg for long prompts, two builds side by side: each
 * build's `motor engine-proxy` (vLLM, NixlConnector) in front of one loopback engine of this script
 * that drains the body and answers a prefill result; `--requests` envelope bodies of each size
 * (`--sizes`, KiB) per round and build, builds alternating who goes first, `--rounds` rounds after a
 * warm-up. CPU = Δ(utime + stime) of the proxy process (/proc), ms per request; medians over rounds.
 *
 *   npx tsx scripts/bench/proxy-splice.ts --a DIR --b DIR [--sizes 225,1024] [--requests 30]
 *     [--rounds 5] [--warmup 500]
 */
import { createServer } from 'node:http';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';
import { envelope } from '../../src/engine-proxy/testing/index.js';
import { longChatBody } from './long-prompt-floors.js';
import { cpuMs } from './proc-stat.js';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: '.' },
    b: { type: 'string', default: '.' },
    sizes: { type: 'string', default: '225,1024' },
    requests: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '500' },
  },
});
const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  return (s[Math.floor((s.length - 1) / 2)]! + s[Math.ceil((s.length - 1) / 2)]!) / 2;
};
const ANSWER = JSON.stringify({
  id: 'chatcmpl-x',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'a' }, finish_reason: 'length' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  kv_transfer_params: { do_remote_prefill: true, remote_engine_id: 'e', remote_block_ids: [1] },
});
const engine = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const body = req.method === 'GET' ? JSON.stringify({ object: 'list', data: [{ id: 'm' }] }) : ANSWER;
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
});
await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
const engineUrl = `http://127.0.0.1:${(engine.address() as { port: number }).port}`;
const dir = await mkdtemp(join(tmpdir(), 'motor-proxy-splice-'));
const config = join(dir, 'nixl.json');
await writeFile(config, JSON.stringify({ kv_transfer_config: { kv_connector: 'NixlConnector' } }));
const children: MotorChild[] = [];
try {
  const targets = await Promise.all(
    (['a', 'b'] as const).map(async (name) => {
      const c = await spawnMotor(
        [
          'engine-proxy',
          '--engine-url',
          engineUrl,
          '--role',
          'prefill',
          '--engine-config',
          config,
          '--peer-allow',
          'http://127.0.0.1:*',
          '--max-body-bytes',
          String(16 * 2 ** 20),
          '--port',
          '0',
        ],
        { timeoutMs: 60_000, followLogs: false, bin: join(resolve(values[name]), 'bin', 'motor.js') },
      );
      children.push(c);
      return { name, c, pool: new Pool(c.url, { connections: 1 }) };
    }),
  );
  let seq = 0;
  /** The client body with a fresh envelope (each attempt id once). */
  const withEnvelope = (text: string): string => {
    const root = `r${seq++}`;
    const env = envelope('prefill', 'prefill_handoff_decode', {
      root,
      prefillUrl: targets[0]!.c.url,
      decodeUrl: 'http://127.0.0.1:9',
    });
    return `${text.slice(0, -1)},"_motor_dispatch":${JSON.stringify(env)}}`;
  };
  const post = async (pool: Pool, text: string): Promise<void> => {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: withEnvelope(text),
    });
    const out = await res.body.text();
    if (res.statusCode !== 200)
      throw new Error(`engine proxy answered ${res.statusCode}: ${out.slice(0, 300)}`);
  };
  const small = longChatBody(2048, 'm', 16);
  for (const t of targets) for (let i = 0; i < Number(values.warmup); i++) await post(t.pool, small);
  console.log(
    `proxy-splice: A ${resolve(values.a)}, B ${resolve(values.b)}; ${values.requests} requests × ${values.rounds} rounds per size`,
  );
  for (const kib of values.sizes.split(',').map(Number)) {
    const text = longChatBody(kib * 1024, 'm', 16);
    for (const t of targets) for (let i = 0; i < 10; i++) await post(t.pool, text);
    const per = new Map(targets.map((t) => [t.name, [] as number[]]));
    for (let r = 0; r < Number(values.rounds); r++) {
      for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
        const pid = t.c.child.pid!;
        const before = await cpuMs([pid]);
        for (let i = 0; i < Number(values.requests); i++) await post(t.pool, text);
        per.get(t.name)!.push(((await cpuMs([pid])) - before) / Number(values.requests));
      }
    }
    const a = per.get('a')!;
    const b = per.get('b')!;
    const paired = a.map((x, i) => b[i]! / x);
    console.log(
      `${kib} KiB: A ${median(a).toFixed(2)} ms/req (${a.map((x) => x.toFixed(2)).join(' ')}), ` +
        `B ${median(b).toFixed(2)} ms/req (${b.map((x) => x.toFixed(2)).join(' ')}); B/A median paired ${median(paired).toFixed(3)}`,
    );
  }
  for (const t of targets) await t.pool.close();
} finally {
  for (const c of children) await c.stop().catch(() => undefined);
  engine.close();
  engine.closeAllConnections();
  await rm(dir, { recursive: true, force: true });
}
