import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { PEER_SECRET_ENV } from '../common/peer-secrets.js';
import { mergeDeep } from '../config/merge-deep.js';
import { MotorChildError, spawnMotor, type MotorChild } from './motor-child.js';

export type ClusterProfile = 'handoff' | 'trigger' | 'bootstrap';

export interface LocalClusterOptions {
  prefill: number;
  decode: number;
  union: number;
  profile: ClusterProfile;
  /** Coordinator listen address. */
  host: string;
  port: number;
  model: string;
  /** Simulator `--time-scale` (1 = a 7B model on one GPU, 0 = no delays). */
  timeScale: number;
  /** Talk engine-native to the simulators instead of through `motor engine-proxy`. */
  direct: boolean;
  /** Extra `motor sim` flags for every simulator. */
  simArgs: string[];
  /**
   * Coordinator settings merged over the generated config (`motor up --config` / `--set`); anything
   * but `instances`, which the cluster owns.
   */
  coordinator?: Record<string, unknown>;
  /** Called with each started process (for progress output). */
  onStarted?: (what: string, url: string) => void;
}

/** A process of the cluster did not start; the message is one line naming it and why. */
export class ClusterStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClusterStartError';
  }
}

export interface ClusterInstance {
  role: 'prefill' | 'decode' | 'union';
  simUrl: string;
  /** The URL the coordinator talks to: the proxy, or the simulator in direct mode. */
  url: string;
}

export interface LocalCluster {
  baseUrl: string;
  /** The coordinator's management API (`motor doctor --coordinator`), null when configured off. */
  managementUrl: string | null;
  instances: ClusterInstance[];
  stop(): Promise<void>;
}

/** The name the management API gives its `listening` log line (registry/management-api.ts). */
const MANAGEMENT_SERVER = 'management';

const CONNECTOR: Record<ClusterProfile, string | undefined> = {
  handoff: 'NixlConnector',
  trigger: 'MooncakeLayerwiseConnector',
  bootstrap: undefined,
};

/**
 * Starts a local P/D cluster as separate processes — simulators, one engine proxy per simulator
 * (unless direct), and a coordinator — and stops everything already started if any step fails.
 */
export async function startLocalCluster(opts: LocalClusterOptions): Promise<LocalCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'motor-up-'));
  const children: MotorChild[] = [];
  const stop = async (): Promise<void> => {
    // Coordinator first so no new work reaches engines that are going away.
    await Promise.all([...children].reverse().map((c) => c.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  // One random peer secret per cluster, in every child's environment (never on a command line): the
  // coordinator sends it (engineProxy.peerSecretEnv), the proxies require it, so `motor up` is
  // authenticated by default.
  const env = { ...process.env, [PEER_SECRET_ENV]: randomBytes(32).toString('base64url') };
  const started = async (what: string, args: string[], waitFor: string[] = []): Promise<MotorChild> => {
    let child: MotorChild;
    try {
      // Generous: a loaded machine (or a cold cache) can take many seconds to start a Node process.
      child = await spawnMotor(args, { timeoutMs: 60_000, env, waitFor });
    } catch (err) {
      // the child's own one-line error (`motor coordinator: port 8000 … in use`) names the cause
      if (err instanceof MotorChildError) throw new ClusterStartError(`${what} did not start: ${err.reason}`);
      throw err;
    }
    children.push(child);
    opts.onStarted?.(what, child.url);
    return child;
  };
  try {
    const engine = opts.profile === 'bootstrap' ? 'sglang' : 'vllm';
    const connector = CONNECTOR[opts.profile];
    const engineConfigFile = join(dir, 'engine-config.json');
    await writeFile(
      engineConfigFile,
      JSON.stringify(
        connector ? { kv_transfer_config: { kv_connector: connector } } : { engine_type: engine },
      ),
    );
    const instances = await Promise.all(
      clusterRoles(opts).map(async (role, i): Promise<ClusterInstance> => {
        const simArgs = ['sim', '--role', role, '--engine', engine, '--model', opts.model];
        simArgs.push(
          '--time-scale',
          String(opts.timeScale),
          ...(connector ? ['--kv-connector', connector] : []),
          // SGLang's bootstrap server has its own port (default 8998): several prefills need free ones
          ...(engine === 'sglang' && role === 'prefill' ? ['--bootstrap-port', '0'] : []),
        );
        const sim = await started(`sim ${role}-${i}`, [...simArgs, ...opts.simArgs]);
        if (opts.direct) return { role, simUrl: sim.url, url: sim.url };
        const proxy = await started(`engine-proxy ${role}-${i}`, [
          'engine-proxy',
          '--engine-url',
          sim.url,
          '--role',
          role,
          '--engine',
          engine,
          '--engine-config',
          engineConfigFile,
          '--peer-allow',
          'http://127.0.0.1:*',
        ]);
        return { role, simUrl: sim.url, url: proxy.url };
      }),
    );
    const configFile = join(dir, 'motor.yaml');
    const config = clusterCoordinatorConfig(opts, instances);
    await writeFile(configFile, stringify(config));
    const management = (config.management as { port?: number | null } | undefined)?.port != null;
    const coordinator = await started(
      'coordinator',
      ['coordinator', '--config', configFile],
      management ? [MANAGEMENT_SERVER] : [],
    );
    const managementUrl = management ? (coordinator.urls[MANAGEMENT_SERVER] ?? null) : null;
    return { baseUrl: coordinator.url, managementUrl, instances, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The role of each instance, in the order of their ids (`prefill-0`, …, `decode-2`, …). */
export function clusterRoles(
  counts: Pick<LocalClusterOptions, 'prefill' | 'decode' | 'union'>,
): ClusterInstance['role'][] {
  return [
    ...Array<'prefill'>(counts.prefill).fill('prefill'),
    ...Array<'decode'>(counts.decode).fill('decode'),
    ...Array<'union'>(counts.union).fill('union'),
  ];
}

/**
 * The coordinator config of a local cluster: its instances (by URL), the listen address, and the
 * caller's `coordinator` settings merged over the defaults. `motor up` also builds it with placeholder
 * URLs to validate the settings before it starts anything.
 */
export function clusterCoordinatorConfig(
  opts: Omit<LocalClusterOptions, 'onStarted' | 'simArgs' | 'timeScale'>,
  instances: readonly Pick<ClusterInstance, 'role' | 'url'>[],
): Record<string, unknown> {
  const engine = opts.profile === 'bootstrap' ? 'sglang' : 'vllm';
  const generated = {
    server: { host: opts.host, port: opts.port },
    // Through engine proxies `{url, role}` is enough: the coordinator discovers engine, profile,
    // capabilities and models from each proxy. Stock engines must be described.
    instances: instances.map((inst, i) =>
      opts.direct
        ? {
            id: `${inst.role}-${i}`,
            url: inst.url,
            role: inst.role,
            mode: 'direct',
            engine,
            dispatchProfile: opts.profile,
            models: [opts.model],
          }
        : { id: `${inst.role}-${i}`, url: inst.url, role: inst.role },
    ),
    dispatch: { fallbackToSingle: true },
    // A management API on loopback (any free port) so the local cluster has `motor doctor`, drain and
    // pause; never on --host, which may face a network (it has no admin token by default).
    management: { host: '127.0.0.1', port: 0 },
    // the proxies require the cluster's peer secret (startLocalCluster puts it in every child's env)
    ...(opts.direct ? {} : { engineProxy: { peerSecretEnv: PEER_SECRET_ENV } }),
    // Union instances beside P/D pairs are only a fallback by default; here they serve short prompts.
    ...(opts.union > 0 && opts.prefill + opts.decode > 0
      ? { scheduling: { disaggregation: { mode: 'conditional' } } }
      : {}),
  };
  return mergeDeep(generated, opts.coordinator ?? {}) as Record<string, unknown>;
}
