import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MotorChildError, spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';

/**
 * `motor coordinator --workers N` end to end (issue 19): real processes, runs dist/ (`npm run build`
 * first). Which worker answered is read from the access log (`worker` on every worker's line).
 */
const MODEL = 'motor-sim-7b';
/** Two workers start in a few seconds, but this machine is shared: room to start (not a timing claim). */
const START_MS = 60_000;
let dir: string;
let sim: MotorChild;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'motor-workers-'));
  // decode steps of 5 ms: a 40-token stream is still running when SIGTERM arrives
  sim = await spawnMotor([
    'sim',
    '--port',
    '0',
    '--role',
    'union',
    '--itl-ms',
    '5',
    '--prefill-overhead-ms',
    '1',
  ]);
}, 90_000);
afterAll(async () => {
  await sim?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function configFile(extra: Record<string, unknown> = {}): Promise<string> {
  const file = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  const instances = [{ url: sim.url, role: 'union', mode: 'direct', models: [MODEL] }];
  await writeFile(file, stringify({ server: { port: 0 }, instances, ...extra }));
  return file;
}

const chat = (stream: boolean, maxTokens = 4): string =>
  JSON.stringify({
    model: MODEL,
    stream,
    max_tokens: maxTokens,
    messages: [{ role: 'user', content: 'hi' }],
  });

/** One request on its own connection: node:cluster hands connections to workers round-robin. */
async function once(url: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  const client = new Client(url);
  try {
    const res = await client.request({
      path,
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body }),
    });
    return { status: res.statusCode, text: await res.body.text() };
  } finally {
    await client.close();
  }
}

/** Sum of every series of `name` in Prometheus text. */
const total = (text: string, name: string): number =>
  text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

/** Resolves with the first log line `match` accepts, seen already or still to come. */
function logLine(
  child: MotorChild,
  match: (l: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const look = (): void => {
      const hit = child.logs.find(match);
      if (hit) resolve(hit);
      else child.child.stdout!.once('data', () => setImmediate(look));
    };
    look();
  });
}

describe('motor coordinator --workers 2', () => {
  it('serves streamed and non-stream chats on both workers, /metrics adds them up, SIGTERM drains and exits 0', async () => {
    const motor = await spawnMotor(['coordinator', '--config', await configFile(), '--workers', '2'], {
      waitFor: ['workers'],
      timeoutMs: START_MS,
    });
    expect(motor.urls.workers).toBe(motor.url);
    const results = [];
    for (let i = 0; i < 6; i++)
      results.push(await once(motor.url, '/v1/chat/completions', chat(i % 2 === 0)));
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe(200);
      if (i % 2 === 0) expect(r.text).toMatch(/data: \[DONE\]\n\n$/);
      else expect(JSON.parse(r.text)).toMatchObject({ object: 'chat.completion' });
    }
    // each worker alone counted about half: the answer is the cluster's whichever worker gives it
    for (let i = 0; i < 2; i++) {
      const metrics = await once(motor.url, '/metrics');
      expect(metrics.status).toBe(200);
      expect(total(metrics.text, 'motor_requests_total')).toBe(6);
    }
    // a stream in flight when SIGTERM arrives finishes (the drain), then every process exits 0
    const client = new Client(motor.url);
    const res = await client.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat(true, 40),
    });
    const chunks: Buffer[] = [];
    const first = new Promise<void>((resolve) => res.body.once('data', () => resolve()));
    res.body.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise<void>((resolve) => res.body.once('end', () => resolve()));
    await first;
    const exited = new Promise<number | null>((resolve) => motor.child.once('exit', (code) => resolve(code)));
    await motor.stop(15_000);
    await ended;
    await client.close();
    expect(await exited).toBe(0);
    expect(Buffer.concat(chunks).toString()).toMatch(/data: \[DONE\]\n\n$/);

    const served = new Set(motor.logs.filter((l) => l.msg === 'request').map((l) => l.worker));
    expect([...served].sort()).toEqual([1, 2]);
    const shutdowns = motor.logs.filter((l) => l.msg === 'shutdown');
    expect(shutdowns.filter((l) => l.worker !== undefined)).toHaveLength(2);
    expect(shutdowns.find((l) => l.in_flight === 1)).toMatchObject({ drained: true, cut: 0 });
    expect(shutdowns.find((l) => l.worker === undefined)).toMatchObject({
      signal: 'SIGTERM',
      workers: 2,
      clean: true,
    });
  }, 120_000);

  it('a worker that dies is logged and replaced; the port keeps serving', async () => {
    const motor = await spawnMotor(['coordinator', '--config', await configFile(), '--workers', '2'], {
      waitFor: ['workers'],
      timeoutMs: START_MS,
    });
    try {
      const victim = await logLine(motor, (l) => l.msg === 'listening' && l.worker === 1);
      process.kill(victim.pid as number, 'SIGKILL');
      await logLine(motor, (l) => l.msg === 'worker exited' && l.pid === victim.pid);
      await logLine(motor, (l) => l.msg === 'worker restarted');
      for (let i = 0; i < 4; i++)
        expect((await once(motor.url, '/v1/chat/completions', chat(false))).status).toBe(200);
    } finally {
      await motor.stop(15_000);
    }
  }, 120_000);
});

describe('motor coordinator --workers 2: direct trigger (metaserver) across workers', () => {
  const LAYERWISE = { kv_connector: 'MooncakeLayerwiseConnector' };
  let pd: MotorChild[] = [];
  beforeAll(async () => {
    const sim = (role: string) =>
      spawnMotor(['sim', '--port', '0', '--role', role, '--itl-ms', '1', '--prefill-overhead-ms', '1']);
    pd = await Promise.all([sim('prefill'), sim('decode')]);
  }, 90_000);
  afterAll(async () => {
    await Promise.all(pd.map((c) => c.stop()));
  });

  it("a decode engine's metaserver call that reaches the other worker is passed to the attempt's worker", async () => {
    const file = join(dir, 'trigger.yaml');
    const [p, d] = pd as [MotorChild, MotorChild];
    await writeFile(
      file,
      stringify({
        server: { port: 0 },
        instances: [
          {
            id: 'P',
            url: p.url,
            role: 'prefill',
            mode: 'direct',
            models: [MODEL],
            kvTransferConfig: LAYERWISE,
          },
          {
            id: 'D',
            url: d.url,
            role: 'decode',
            mode: 'direct',
            models: [MODEL],
            kvTransferConfig: LAYERWISE,
          },
        ],
      }),
    );
    const motor = await spawnMotor(['coordinator', '--config', file, '--workers', '2'], {
      waitFor: ['workers'],
      timeoutMs: START_MS,
    });
    try {
      // each request on its own connection: both workers start attempts, while the decode sim calls
      // the metaserver over connections of its own, which the primary hands to either worker
      const results = [];
      for (let i = 0; i < 8; i++)
        results.push(await once(motor.url, '/v1/chat/completions', chat(i % 2 === 0)));
      expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    } finally {
      await motor.stop(15_000);
    }
    const served = new Set(motor.logs.filter((l) => l.msg === 'request').map((l) => l.worker));
    expect([...served].sort()).toEqual([1, 2]);
    expect(motor.logs.filter((l) => l.msg === 'request').map((l) => l.plan)).toEqual(
      Array(8).fill('trigger'),
    );
  }, 120_000);
});

describe('motor coordinator --workers: start-up errors stay one line', () => {
  let busy: Server;
  let busyPort: number;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => busy.close(() => resolve())));

  it.each([
    [
      'a bad count',
      () => ['--workers', 'two'],
      /^motor coordinator: --workers two: expected 'auto' or a whole number/,
    ],
    [
      'a busy port',
      () => ['--workers', '2', '--port', String(busyPort)],
      /^motor coordinator: .*\(server\.port\)$/,
    ],
    [
      'management on a memory registry',
      () => ['--workers', '2', '--set', 'management.port=0'],
      /^motor coordinator: --workers 2: management\.port needs registry\.store: etcd/,
    ],
  ])(
    '%s',
    async (_what, args, expected) => {
      const err = await spawnMotor(['coordinator', '--config', await configFile(), ...args()], {
        timeoutMs: START_MS,
      }).then(
        (c) => c.stop().then(() => null),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(MotorChildError);
      const stderr = (err as MotorChildError).message
        .split('\n')
        .filter((l) => l.startsWith('motor coordinator:'));
      expect(stderr).toHaveLength(1);
      expect(stderr[0]).toMatch(expected);
    },
    90_000,
  );
});
