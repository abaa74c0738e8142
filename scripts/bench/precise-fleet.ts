/**
 * The fleet of scripts/bench/precise-e2e.ts: `motor sim` processes tokenising with the Qwen3 tokenizer
 * and hashing blocks the vLLM way, prefills publishing KV events; one or two `motor coordinator`s,
 * two behind a round-robin HTTP proxy (the "load balancer"). Everything on loopback, port 0.
 */
import { writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';
import { QWEN3_DIR } from '../../src/model-tokenizer/testing/index.js';

export const MODEL = 'qwen3';
export const BLOCK = 16;
const NIXL = { kv_connector: 'NixlConnector' };

export interface SimSizing {
  prefills: number;
  decodes: number;
  kvBlocks: number;
  prefillMsPerToken: number;
  prefillMaxSeqs: number;
  itlMs: number;
  /** `--max-num-batched-tokens` for the prefill sims (the shared prefill budget being added); null: not passed. */
  maxNumBatchedTokens: number | null;
}

/** The `kvHash` group every coordinator (and the script's own predictor) hashes prompts with. */
export const KV_HASH = {
  groups: [
    {
      name: 'qwen3',
      models: [MODEL],
      tokenizer: { path: QWEN3_DIR },
      blockHash: { algo: 'sha256', blockSize: BLOCK, seed: '0' },
    },
  ],
};

/** `precise-events`: precise-prefix on the events alone (`kvEvents.inflightTtlMs: 0`, no in-flight overlay). */
export type Policy = 'precise' | 'precise-events' | 'approximate' | 'least-load' | 'round-robin';
export const POLICIES: readonly Policy[] = [
  'precise',
  'precise-events',
  'approximate',
  'least-load',
  'round-robin',
];
const onEvents = (policy: Policy): boolean => policy === 'precise' || policy === 'precise-events';

function simArgs(role: 'prefill' | 'decode', z: SimSizing): string[] {
  const common = [
    'sim',
    '--port',
    '0',
    '--role',
    role,
    '--model',
    MODEL,
    '--record-max',
    '0',
    '--tokenizer',
    QWEN3_DIR,
    '--prefix-caching-hash-algo',
    'sha256',
    '--hash-seed',
    '0',
    '--block-size',
    String(BLOCK),
  ];
  if (role === 'decode')
    return [...common, '--itl-ms', String(z.itlMs), '--max-num-seqs', '256', '--kv-blocks', '200000'];
  return [
    ...common,
    '--kv-events-endpoint',
    'tcp://127.0.0.1:*',
    '--kv-events-replay-endpoint',
    'tcp://127.0.0.1:*',
    '--prefill-ms-per-token',
    String(z.prefillMsPerToken),
    '--prefill-overhead-ms',
    '5',
    '--max-num-seqs',
    String(z.prefillMaxSeqs),
    '--kv-blocks',
    String(z.kvBlocks),
    ...(z.maxNumBatchedTokens !== null ? ['--max-num-batched-tokens', String(z.maxNumBatchedTokens)] : []),
  ];
}

/** The bound KV events endpoints from a sim's `listening` line. */
function kvEndpointsOf(sim: MotorChild): { endpoint: string; replayEndpoint: string } {
  for (const line of sim.logs) {
    const ev = line.kv_events as { endpoint?: string; replayEndpoint?: string } | undefined;
    if (ev?.endpoint && ev.replayEndpoint)
      return { endpoint: ev.endpoint, replayEndpoint: ev.replayEndpoint };
  }
  throw new Error('simulator logged no kv_events endpoints');
}

function schedulingFor(policy: Policy, kvBlocks: number): Record<string, unknown> {
  if (policy === 'least-load' || policy === 'round-robin') return { policy };
  // both affinity scorers: the routed-history index mirrors the engines' capacity (16-token blocks)
  const type = onEvents(policy) ? 'precise-prefix' : 'prefix-affinity';
  return {
    policy: 'prefix-affinity',
    prefill: { scorers: [{ type, params: { capacityBlocks: kvBlocks } }], picker: { type: 'max-score' } },
  };
}

export interface Fleet {
  /** Coordinator base URLs (one or two). */
  coordinators: string[];
  /** What clients call: the coordinator, or the round-robin proxy in front of two. */
  url: string;
  /** Prefill instances and where they publish KV events (live and replay). */
  prefillEvents: Array<{ id: string; endpoint: string; replayEndpoint: string }>;
  close(): Promise<void>;
}

/** Starts fresh sims (empty caches) and `replicas` coordinators routing with `policy`. */
export async function startFleet(
  policy: Policy,
  replicas: 1 | 2,
  z: SimSizing,
  dir: string,
  /** A Redis URL: two replicas share their routing state through it (`routingSync`). */
  routingSyncUrl?: string,
): Promise<Fleet> {
  const children: MotorChild[] = [];
  let proxy: Server | null = null;
  const close = async () => {
    if (proxy) await new Promise<void>((r) => proxy!.close(() => r()));
    await Promise.all(children.map((c) => c.stop()));
  };
  const spawn = async (args: string[]) => {
    const c = await spawnMotor(args, { timeoutMs: 120_000, maxLogLines: 50 });
    children.push(c);
    return c;
  };
  try {
    const [prefills, decodes] = await Promise.all([
      Promise.all(Array.from({ length: z.prefills }, () => spawn(simArgs('prefill', z)))),
      Promise.all(Array.from({ length: z.decodes }, () => spawn(simArgs('decode', z)))),
    ]);
    const prefillEvents = prefills.map((s, i) => ({ id: `P${i}`, ...kvEndpointsOf(s) }));
    const instances = [
      ...prefills.map((s, i) => ({
        id: `P${i}`,
        url: s.url,
        role: 'prefill',
        mode: 'direct',
        kvTransferConfig: NIXL,
        models: [MODEL],
        // the approximate policy gets no events: it routes on its own routed history only
        ...(onEvents(policy)
          ? {
              kvEvents: {
                endpoint: prefillEvents[i]!.endpoint,
                replayEndpoint: prefillEvents[i]!.replayEndpoint,
              },
            }
          : {}),
      })),
      ...decodes.map((s, i) => ({
        id: `D${i}`,
        url: s.url,
        role: 'decode',
        mode: 'direct',
        kvTransferConfig: NIXL,
        models: [MODEL],
      })),
    ];
    const file = join(dir, `motor-${policy}-${replicas}.yaml`);
    await writeFile(
      file,
      stringify({
        server: { port: 0 },
        instances,
        scheduling: schedulingFor(policy, z.kvBlocks),
        ...(onEvents(policy) ? { kvHash: KV_HASH } : {}),
        ...(policy === 'precise-events' ? { kvEvents: { inflightTtlMs: 0 } } : {}),
        timeouts: { firstTokenMs: 120_000 },
        observability: { accessLog: false },
        ...(routingSyncUrl !== undefined &&
          replicas === 2 && {
            routingSync: {
              redis: { url: routingSyncUrl },
              channel: `motor-bench-${process.pid}-${Date.now()}`,
            },
          }),
      }),
    );
    const coords = await Promise.all(
      Array.from({ length: replicas }, () => spawn(['coordinator', '--config', file])),
    );
    const coordinators = coords.map((c) => c.url);
    let url = coordinators[0]!;
    if (replicas === 2) {
      proxy = await roundRobinProxy(coordinators);
      url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    }
    return { coordinators, url, prefillEvents, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * A minimal HTTP load balancer: request k goes to `targets[k % n]`, body and answer streamed through
 * unchanged (keep-alive to the targets). What a round-robin L7 balancer in front of coordinator
 * replicas does (nginx `upstream` round-robin would do the same; this keeps the script self-contained).
 */
export async function roundRobinProxy(targets: readonly string[]): Promise<Server> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  let next = 0;
  const server = createServer((req, res) => {
    const target = new URL(targets[next++ % targets.length]!);
    const up = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${err.message}`);
    });
    req.pipe(up);
  });
  server.on('close', () => agent.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}
