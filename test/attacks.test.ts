import { request } from 'node:http';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import { http } from '../src/simulator/testing/index.js';
import {
  eventually,
  LAYERWISE,
  MODEL,
  recorded,
  resetSim,
  settledLedgers,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';
import { rawSocket } from './helpers/raw-sockets.js';

/**
 * The attacks of the adversarial run, repeated against one real fleet (a coordinator process in
 * direct trigger mode over two simulator processes, loopback), each while a well-behaved client keeps
 * being served — and no attack may open an instance's circuit. Counts are scaled down from the run's
 * (bounded network tests); each attack also has its own regression test next to the code.
 *
 * Green on a loaded machine: every test waits for the event it proves (a counter, a socket closing, an
 * answer), never for a deadline of its own, and the fleet's timeouts sit far above the event-loop lag
 * of a machine at load 20+ (a timeout that fires because the machine is slow opens a circuit or
 * answers 408 where the test expects the attack's own outcome). Each test's only bound is its vitest
 * timeout.
 */

const KEYS = { alice: 'key-alice', bob: 'key-bob' };
/** The decode engine's own body limit, under the coordinator's 4 MiB: the leg a client body becomes is refused by it. */
const ENGINE_MAX_BODY = 1024 * 1024;

let prefill: MotorChild;
let decode: MotorChild;
let coord: CoordinatorHandle;

beforeAll(async () => {
  [prefill, decode] = await Promise.all([
    startSim({ role: 'prefill' }),
    startSim({
      role: 'decode',
      // time scale 0.001: a long answer outruns a non-reading client's socket buffers within a second, yet the
      // engine still paces (yields) between steps, as a real one interleaves its streams
      args: [
        '--max-body-bytes',
        String(ENGINE_MAX_BODY),
        '--max-model-len',
        '1000000',
        '--time-scale',
        '0.001',
      ],
    }),
  ]);
  coord = await startCoordinatorProcess({
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20 },
    // idleMs under clientStallMs: a client's pause counted as engine silence would show as idle_timeout;
    // both well above a loaded machine's scheduling gaps (a 1 s idleMs was an engine "silence" at load 20)
    timeouts: { firstTokenMs: 60_000, idleMs: 4_000, clientStallMs: 6_000 },
    server: {
      apiKeys: [KEYS.alice, KEYS.bob],
      tenantIsolation: 'api-key',
      // idle sockets are closed by it, yet far above the event-loop lag of a loaded machine: while 50 4 MiB
      // bodies were parsed, a bystander's headers waited over 5 s at load 20 (Node's bare 408)
      headersTimeoutMs: 15_000,
      // queued 4 MiB bodies are not read while they wait for budget: Node's request timeout counts that wait
      requestTimeoutMs: 180_000,
      // 50 concurrent 4 MiB bodies wait for room instead of all being held at once: reserved
      // whole and with no per-client share, as before reservations (admission-before-body.test.ts covers those)
      maxInflightBodyBytes: 16 * 1024 * 1024,
      bodyReservationBytes: 4 * 1024 * 1024,
      clientBodyShare: 1,
    },
    // one failure opens a circuit: any charge an attack causes shows at once. Queued bodies wait as long as
    // the machine needs to pass the 50 through a 16 MiB budget (the default 30 s gave 503s at load 20)
    scheduling: { circuitBreaker: { failureThreshold: 1 }, admission: { queueTimeoutMs: 180_000 } },
    // no attack here is about health: probes slower than 1 s on a loaded machine took both engines out
    health: { timeoutMs: 15_000, unhealthyAfter: 5 },
    instances: [
      {
        id: 'P',
        url: prefill.url,
        role: 'prefill',
        mode: 'direct',
        models: [MODEL],
        kvTransferConfig: LAYERWISE,
      },
      {
        id: 'D',
        url: decode.url,
        role: 'decode',
        mode: 'direct',
        models: [MODEL],
        kvTransferConfig: LAYERWISE,
      },
    ],
  });
}, 120_000);

afterAll(async () => {
  await stopAllSpawned();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content }],
  max_tokens: 8,
  ...extra,
});

/** A well-behaved client's request: must be served in full while an attack runs. */
async function served(key = KEYS.alice): Promise<void> {
  const r = await http(coord.url, 'POST', '/v1/chat/completions', chat('hello there'), auth(key));
  expect(r.status, r.text).toBe(200);
  expect((r.json as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason).toBe('length');
}

/** No instance's circuit is open (the coordinator's `motor_instance_circuit_state{state="open"}` is 0). */
async function noCircuitOpened(): Promise<void> {
  const text = (await http(coord.url, 'GET', '/metrics')).text;
  const open = text
    .split('\n')
    .filter((l) => l.startsWith('motor_instance_circuit_state{') && l.includes('state="open"'));
  expect(open.length).toBeGreaterThan(0);
  for (const line of open) expect(line.endsWith(' 0'), line).toBe(true);
}

/** Sum of a coordinator counter's series whose labels contain `label`. */
async function metricSum(name: string, label: string): Promise<number> {
  const text = (await http(coord.url, 'GET', '/metrics')).text;
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) && line.includes(label))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** POSTs `bytes` bytes of body to `path` without awaiting an answer beyond the status (or a reset). */
function blindPost(path: string, bytes: number, headers: Record<string, string> = {}): Promise<number> {
  const { hostname, port } = new URL(coord.url);
  return new Promise((resolve) => {
    const req = request(
      {
        host: hostname,
        port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(Buffer.alloc(bytes, 0x20));
  });
}

describe('the adversarial run, repeated', () => {
  it('guessed and bare metaserver calls are refused and the victims are served', async () => {
    const r = await http(coord.url, 'POST', '/v1/chat/completions', chat('victim'), auth(KEYS.alice));
    expect(r.status, r.text).toBe(200);
    const root = (r.json as { id: string }).id.replace(/^chatcmpl-/, '');
    const guesses = [`/v1/metaserver`, `/v1/metaserver/${root}%23a1`, `/v1/metaserver/${root}`];
    const body = {
      request_id: `${root}#a2`,
      remote_block_ids: [1],
      remote_engine_id: 'x',
      remote_host: '10.0.0.1',
      remote_port: 1,
    };
    const [answers] = await Promise.all([
      Promise.all(guesses.map((p) => http(coord.url, 'POST', p, body))),
      Promise.all(Array.from({ length: 4 }, () => served())),
    ]);
    for (const a of answers) expect(a.status).toBe(404);
    await noCircuitOpened();
  }, 120_000);

  it('a flood of large unauthenticated metaserver calls costs no memory and no service', async () => {
    const before = await rssMiB(coord.child.child.pid!);
    const flood = Array.from({ length: 60 }, (_, i) =>
      blindPost(`/v1/metaserver/guess-${i}`, 3.8 * 1024 * 1024),
    );
    await Promise.all([served(), served()]);
    const statuses = await Promise.all(flood);
    for (const s of statuses) expect([0, 404]).toContain(s);
    expect(await rssMiB(coord.child.child.pid!)).toBeLessThan(before + 150);
    await noCircuitOpened();
  }, 120_000);

  it('six clients that stop reading are cut as client_stalled; no breaker opens', async () => {
    // A client counts as stalled once the coordinator's socket to it is full: about 4 MiB of loopback
    // buffers. Top-20 logprobs make each frame ~1.5 KB instead of ~200 B, so the buffers fill after a few
    // thousand frames rather than ~20,000 per reader (at load 20 those took over 75 s of CPU); 20,000
    // tokens (~30 MB) still outlast them many times over.
    const body = JSON.stringify(
      chat('long one', {
        stream: true,
        max_tokens: 20_000,
        ignore_eos: true,
        logprobs: true,
        top_logprobs: 20,
      }),
    );
    const stalledBefore = await metricSum('motor_attempt_failures_total', 'code="client_stalled"');
    const readers = Array.from({ length: 6 }, () =>
      rawSocket(
        coord.url,
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEYS.bob}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        { paused: true },
      ),
    );
    await served();
    await eventually(async () => {
      const stalled = await metricSum('motor_attempt_failures_total', 'code="client_stalled"');
      expect(stalled - stalledBefore).toBe(6);
    }, 170_000); // the event, however long the machine takes to fill the buffers; the bound is the test's
    for (const r of readers) r.destroy();
    await served();
    await noCircuitOpened();
  }, 180_000);

  it('idle sockets are closed by the server while others are served', async () => {
    const idle = Array.from({ length: 500 }, () => rawSocket(coord.url));
    await served();
    // the server closes each (the client never does): a socket left open fails the test by its timeout
    await Promise.all(idle.map((s) => s.closed));
    await served();
  }, 90_000);

  it('bodies over the engine limit (under Motor’s) at concurrency are the clients’ 413, never a breaker', async () => {
    const big = JSON.stringify(chat('y'.repeat(2 * ENGINE_MAX_BODY)));
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        http(coord.url, 'POST', '/v1/chat/completions', JSON.parse(big) as unknown, auth(KEYS.alice)),
      ),
    );
    for (const a of answers) expect(a.status, a.text).toBe(413);
    await served();
    await noCircuitOpened();
  }, 120_000);

  it('50 concurrent 4 MiB bodies are admitted a budget at a time; a 259k-key body is refused unparsed', async () => {
    const before = await rssMiB(coord.child.child.pid!);
    const filler = 'z'.repeat(4 * 1024 * 1024 - 200);
    const big = JSON.stringify(chat(filler));
    const keys = `{${Array.from({ length: 259_000 }, (_, i) => `"k${i}":0`).join(',')}}`;
    const [bigAnswers, keyAnswer] = await Promise.all([
      Promise.all(
        Array.from({ length: 50 }, () =>
          http(coord.url, 'POST', '/v1/chat/completions', big, auth(KEYS.alice)),
        ),
      ),
      http(coord.url, 'POST', '/v1/chat/completions', keys, auth(KEYS.bob)),
      served(KEYS.bob),
    ]);
    // each is the decode engine's refusal of its oversized leg (its limit is 1 MiB): the client's, not the engine's
    for (const a of bigAnswers) expect(a.status, a.text).toBe(413);
    expect(keyAnswer.status, keyAnswer.text).toBe(413);
    expect(keyAnswer.text).toContain('keys');
    expect(await rssMiB(coord.child.child.pid!)).toBeLessThan(before + 400);
    await served();
    await noCircuitOpened();
  }, 200_000);

  it('the same prompt from two API keys reaches the engines with different cache salts', async () => {
    await Promise.all([resetSim(prefill), resetSim(decode)]);
    const prompt = 'the shared system prompt '.repeat(20);
    await http(coord.url, 'POST', '/v1/chat/completions', chat(prompt), auth(KEYS.alice));
    await http(coord.url, 'POST', '/v1/chat/completions', chat(prompt), auth(KEYS.bob));
    const salts = (await recorded(decode)).map((r) => (r.body as { cache_salt?: string }).cache_salt);
    expect(salts).toHaveLength(2);
    expect(salts[0]).toEqual(expect.any(String));
    expect(salts[1]).toEqual(expect.any(String));
    expect(salts[0]).not.toBe(salts[1]);
  }, 120_000);

  it('an engine proxy refuses a stop (or any dispatch) without the peer secret, and names no ids', async () => {
    // a union proxy needs no engine config; the routes and their check are the same for every role
    const proxy = await spawnMotor(
      ['engine-proxy', '--engine-url', decode.url, '--role', 'union', '--port', '0'],
      { env: { ...process.env, MOTOR_PEER_SECRET: 'a-peer-secret-of-32-characters!!' }, timeoutMs: 60_000 },
    );
    try {
      const stop = {
        root_request_id: 'victim',
        pair_id: 'guessed-pair',
        attempt_seq: 1,
        reason: 'client_disconnect',
      };
      const attempts: Record<string, string>[] = [
        {},
        { 'x-motor-peer-secret': 'a-wrong-secret-of-32-characters!!' },
      ];
      for (const headers of attempts) {
        const r = await http(proxy.url, 'POST', '/v1/dispatch/stop', stop, headers);
        expect(r.status, r.text).toBe(401);
        expect(r.text).not.toContain('pair');
      }
      const r = await http(proxy.url, 'POST', '/v1/chat/completions', chat('hi'), {});
      expect(r.status).toBe(401);
    } finally {
      await proxy.stop();
    }
  }, 120_000);

  it('leaves nothing running on the engines', async () => {
    await settledLedgers([prefill, decode]);
  });
});
