import type { Command } from 'commander';
import { Option } from 'commander';
import { intArg } from './number-arg.js';
import { parsePeerSecrets, PEER_SECRET_ENV, type PeerSecretSource } from '../common/peer-secrets.js';
import { EXIT_BAD_INPUT, EXIT_FAILED, listenError } from './cli-error.js';
import { placeholderSecretProblems } from '../common/placeholder-secret.js';
import { StructuredFileError } from '../common/structured-file.js';
import { readEngineConfig } from '../protocol/engine-config-input.js';
import { serverLimitsProblem } from '../common/server-limits.js';
import { bootstrapHostProblem } from '../engine-proxy/bootstrap-host.js';
import { ENGINE_PROXY_DEFAULTS, type EngineProxyOptions } from '../engine-proxy/options.js';
import { PeerAllowList } from '../engine-proxy/peer-allow-list.js';
// Direct module imports, not the protocol index: the CLI start-up need not load the zod schemas.
import { dispatchCapabilitiesForProfile, DispatchProfileError } from '../protocol/classification.js';
import { ENGINE_KINDS, explainEngineProfile, type EngineKind } from '../protocol/engine-profile.js';

/** The flags: the proxy's options where they map 1:1, plus what is resolved at start-up. */
interface CliOptions extends Omit<
  EngineProxyOptions,
  | 'engine'
  | 'dispatchCapabilities'
  | 'dispatchProfile'
  | 'bootstrapHost'
  | 'bootstrapPort'
  | 'engineApiKey'
  | 'engineAdminApiKey'
  | 'peerSecret'
> {
  peerSecretFile?: string;
  engineApiKey?: string;
  engineAdminApiKey?: string;
  engineConfig?: string;
  engine?: EngineKind;
  dispatchProfile?: string;
  bootstrapHost?: string;
  bootstrapPort?: number;
  register?: string;
  registerToken?: string;
  instanceId?: string;
  advertiseUrl?: string;
  model: string[];
  heartbeatMs: number;
  drainTimeoutMs: number;
}

const SERVER_LIMIT_FLAGS = {
  headersTimeoutMs: '--headers-timeout-ms',
  requestTimeoutMs: '--request-timeout-ms',
  keepAliveTimeoutMs: '--keep-alive-timeout-ms',
  idleTimeoutMs: '--idle-timeout-ms',
  maxConnections: '--max-connections',
};

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `motor engine-proxy`: the engine side of the Motor protocol, in front of one engine. */
export function registerEngineProxy(program: Command): void {
  const d = ENGINE_PROXY_DEFAULTS;
  program
    .command('engine-proxy')
    .description(
      'run beside one engine (vLLM, SGLang, motor sim) and implement the engine side of the Motor protocol',
    )
    .requiredOption('--engine-url <url>', 'base URL of the engine, e.g. http://127.0.0.1:8000')
    .addOption(
      new Option(
        '--role <role>',
        'P/D role of the engine: prefill accepts envelope roles prefill and single (the degraded path), decode accepts decode, union accepts single',
      )
        .choices(['prefill', 'decode', 'union'])
        .makeOptionMandatory(),
    )
    .option(
      '--engine-config <file>',
      'engine config: a JSON or YAML file, inline JSON or a launch-argument string, as `motor classify` ' +
        'reads it; required for prefill/decode',
    )
    .addOption(
      new Option('--engine <kind>', 'engine kind (default: engine_type in the config, else vllm)').choices([
        ...ENGINE_KINDS,
      ]),
    )
    .option(
      '--dispatch-profile <profile>',
      'explicit dispatch_profile override (trigger, handoff, bootstrap)',
    )
    .option('--host <host>', 'listen host', d.host)
    .option('--port <port>', 'listen port (0 = any free port)', intArg('--port'), d.port)
    .option(
      '--bootstrap-host <host>',
      'SGLang prefill: bootstrap host given to both legs (default: the engine URL host; required when that is ' +
        'loopback and the proxy listens beyond loopback or --peer-allow names a remote peer)',
    )
    .option(
      '--bootstrap-port <port>',
      "SGLang prefill: bootstrap port given to both legs; the engine's own report (GET /server_info, " +
        "disaggregation_bootstrap_port) wins, with a warning when they differ (default: 8998). SGLang's Rust " +
        'server serves it on its HTTP port (see --bootstrap-on-http-port). The proxy waits for the engine to ' +
        'answer before it serves',
      intArg('--bootstrap-port', 1),
    )
    .option(
      '--bootstrap-on-http-port',
      "SGLang prefill run with SGLANG_RUST_SERVER=1: the bootstrap registry is on the engine URL's port " +
        '(also taken when its /server_info says frontend "rust")',
    )
    .addOption(
      new Option(
        '--engine-api-key <key>',
        'Bearer key sent on every engine call (vLLM / SGLang --api-key); never logged',
      ).env('MOTOR_ENGINE_API_KEY'),
    )
    .addOption(
      new Option(
        '--engine-admin-api-key <key>',
        'SGLang --admin-api-key, sent on /abort_request (default: --engine-api-key); never logged',
      ).env('MOTOR_ENGINE_ADMIN_API_KEY'),
    )
    .option(
      '--peer-secret-file <file>',
      'shared peer secret(s), one per line, the first sent: required on dispatch, stop and pass-through calls, ' +
        'sent on peer stops, and the key of per-attempt metaserver URLs; re-read when the file changes ' +
        '(default: env MOTOR_PEER_SECRET, comma-separated; neither = unauthenticated, with a warning)',
    )
    .option(
      '--peer-allow <url>',
      'peer proxy this proxy may call (stops, bootstrap discovery): http://host:port or http://host:* (repeatable)',
      collect,
      [],
    )
    .option(
      '--stop-ttl-ms <ms>',
      'how long finished attempts and stop tombstones are remembered',
      intArg('--stop-ttl-ms', 1),
      d.stopTtlMs,
    )
    .option(
      '--max-tracked-attempts <n>',
      'most finished attempts / tombstones remembered (oldest dropped first)',
      intArg('--max-tracked-attempts', 1),
      d.maxTrackedAttempts,
    )
    .option(
      '--max-active-attempts <n>',
      'most envelope requests in flight (503 beyond)',
      intArg('--max-active-attempts', 1),
      d.maxActiveAttempts,
    )
    .option(
      '--prepared-ttl-ms <ms>',
      'trigger: how long a prepared prefill waits for its metaserver call',
      intArg('--prepared-ttl-ms', 1),
      d.preparedTtlMs,
    )
    .option(
      '--max-prepared <n>',
      'trigger: most prepared prefills held (503 beyond)',
      intArg('--max-prepared', 1),
      d.maxPrepared,
    )
    .option(
      '--handoff-ttl-ms <ms>',
      'handoff: expires_at_ms of completed prefill results (NIXL 2026-01 and vllm-ascend Mooncake free unread blocks after 480 s; capped at the 30 s lease for newest NIXL)',
      intArg('--handoff-ttl-ms', 1),
      d.handoffTtlMs,
    )
    .option(
      '--metaserver-wait-ms <ms>',
      'trigger: how long a metaserver call waits for a late prepare (then 404)',
      intArg('--metaserver-wait-ms'),
      d.metaserverWaitMs,
    )
    .option(
      '--peer-timeout-ms <ms>',
      'bound on peer stops, bootstrap discovery and SGLang /abort_request calls',
      intArg('--peer-timeout-ms', 1),
      d.peerTimeoutMs,
    )
    .option(
      '--engine-timeout-ms <ms>',
      'engine headers / idle body timeout',
      intArg('--engine-timeout-ms', 1),
      d.engineTimeoutMs,
    )
    .option(
      '--engine-connections <n>',
      'keep-alive connections to the engine',
      intArg('--engine-connections', 1),
      d.engineConnections,
    )
    .option(
      '--max-body-bytes <n>',
      'request body limit (413 beyond)',
      intArg('--max-body-bytes', 1),
      d.maxBodyBytes,
    )
    .option(
      '--headers-timeout-ms <ms>',
      "time to receive a request's headers from the connection's start (a silent connection gets 408); 0 = none",
      intArg('--headers-timeout-ms'),
      d.headersTimeoutMs,
    )
    .option(
      '--request-timeout-ms <ms>',
      'time to receive a whole request, body included (a streamed response is not cut); 0 = none',
      intArg('--request-timeout-ms'),
      d.requestTimeoutMs,
    )
    .option(
      '--keep-alive-timeout-ms <ms>',
      'idle time between requests on a kept-alive connection; 0 = none',
      intArg('--keep-alive-timeout-ms'),
      d.keepAliveTimeoutMs,
    )
    .option(
      '--idle-timeout-ms <ms>',
      'socket inactivity that closes a connection, except while a response is in progress; 0 = none',
      intArg('--idle-timeout-ms'),
      d.idleTimeoutMs,
    )
    .option(
      '--max-connections <n>',
      'open connections; beyond it 503 too_many_connections and close; 0 = no cap',
      intArg('--max-connections'),
      d.maxConnections,
    )
    .option(
      '--register <url>',
      'coordinator management API URL to self-register with (heartbeats; drain and deregister on SIGTERM)',
    )
    .option('--register-token <token>', 'management admin token (env MOTOR_ADMIN_TOKEN)')
    .option('--instance-id <id>', 'id to register under (default <role>-<host:port>)')
    .option('--advertise-url <url>', 'URL the coordinator reaches this proxy at (default: the bound URL)')
    .option('--model <name>', 'served model name to register, repeatable (default: any model)', collect, [])
    .option(
      '--heartbeat-ms <ms>',
      'heartbeat period; the lease TTL is 3 × this (whole seconds, at least 1 s)',
      intArg('--heartbeat-ms', 1),
      2000,
    )
    .option(
      '--drain-timeout-ms <ms>',
      "on SIGTERM with --register: how long to wait for the coordinator's in-flight requests after draining",
      intArg('--drain-timeout-ms'),
      30_000,
    )
    .action(async (cli: CliOptions) => {
      const opts = await resolveOptions(cli);
      if (typeof opts === 'string') {
        console.error(`motor engine-proxy: ${opts}`);
        process.exitCode = EXIT_BAD_INPUT;
        return;
      }
      const registerError = checkRegisterFlags(cli);
      if (registerError !== null) {
        console.error(`motor engine-proxy: ${registerError}`);
        process.exitCode = EXIT_BAD_INPUT;
        return;
      }
      // Loaded here, not at the top, so other commands do not pay for the proxy's modules.
      const [{ createLogger }, { onShutdown }, { startEngineProxy }] = await Promise.all([
        import('../common/logger.js'),
        import('../common/shutdown.js'),
        import('../engine-proxy/server.js'),
      ]);
      const logger = createLogger('engine-proxy');
      let server;
      try {
        server = await startEngineProxy(opts, logger);
      } catch (err) {
        const listen = listenError(err);
        console.error(`motor engine-proxy: ${listen?.message ?? (err as Error).message}`);
        process.exitCode = listen?.exitCode ?? EXIT_FAILED;
        return;
      }
      if (cli.register === undefined) {
        onShutdown(() => server.close());
        return;
      }
      const { selfRegister } = await import('../engine-proxy/self-register.js');
      const registration = selfRegister(
        {
          coordinatorUrl: cli.register,
          adminToken: cli.registerToken ?? process.env.MOTOR_ADMIN_TOKEN,
          instanceId: cli.instanceId,
          advertiseUrl: cli.advertiseUrl ?? server.url,
          models: cli.model,
          heartbeatMs: cli.heartbeatMs,
          bootstrapPort: server.bootstrap?.port ?? opts.bootstrapPort,
        },
        opts,
        logger,
      );
      registration.registered.catch((err: unknown) => {
        logger.error({ err: (err as Error).message }, 'self-registration refused; exiting');
        void server.close().finally(() => process.exit(1));
      });
      onShutdown(async () => {
        await registration.close({ drainTimeoutMs: cli.drainTimeoutMs });
        await server.close();
      });
    });
}

function checkRegisterFlags(cli: CliOptions): string | null {
  const dependent = ['registerToken', 'instanceId', 'advertiseUrl'] as const;
  if (cli.register === undefined) {
    const stray = dependent.find((k) => cli[k] !== undefined);
    return stray ? `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --register` : null;
  }
  for (const [flag, value] of [
    ['--register', cli.register],
    ['--advertise-url', cli.advertiseUrl],
  ] as const) {
    if (value === undefined) continue;
    try {
      const u = new URL(value);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') return `${flag} must be http(s): ${value}`;
    } catch {
      return `${flag} is not a URL: ${value}`;
    }
  }
  return null;
}

/** Flags → options, or an error message (unreadable config, no capability for a P/D role, bad URL). */
export async function resolveOptions(cli: CliOptions): Promise<EngineProxyOptions | string> {
  try {
    const u = new URL(cli.engineUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      return `--engine-url must be http(s): ${cli.engineUrl}`;
  } catch {
    return `--engine-url is not a URL: ${cli.engineUrl}`;
  }
  const limitsProblem = serverLimitsProblem(cli, SERVER_LIMIT_FLAGS);
  if (limitsProblem !== null) return limitsProblem;
  try {
    new PeerAllowList(cli.peerAllow);
  } catch (err) {
    return (err as Error).message;
  }
  let config: unknown = {};
  if (cli.engineConfig !== undefined) {
    try {
      ({ config } = await readEngineConfig(cli.engineConfig, '--engine-config'));
    } catch (err) {
      if (!(err instanceof StructuredFileError)) throw err;
      return err.message;
    }
  } else if (cli.role !== 'union') {
    return `--engine-config is required for role ${cli.role} (its KV connector decides the dispatch capabilities)`;
  }
  let explanation;
  try {
    explanation = explainEngineProfile(config, cli.engine, cli.dispatchProfile);
  } catch (err) {
    if (err instanceof DispatchProfileError) return err.message;
    throw err;
  }
  const capabilities = dispatchCapabilitiesForProfile(explanation.profile);
  if (cli.role !== 'union' && capabilities.length === 0) {
    return (
      `refusing to start a ${cli.role} proxy with no dispatch capability: the ${explanation.engine} engine config ` +
      `classifies as '${explanation.profile}' (${explanation.decidedBy}: ${explanation.reason}). Use a supported ` +
      'KV connector or set dispatch_profile (trigger, handoff, bootstrap); see `motor classify`.'
    );
  }
  const resolved: EngineProxyOptions = {
    engineUrl: cli.engineUrl.replace(/\/+$/, ''),
    role: cli.role,
    engine: explanation.engine,
    dispatchCapabilities: capabilities,
    dispatchProfile: explanation.profile,
    kvConnector: explanation.kvConnector ?? null,
    host: cli.host,
    port: cli.port,
    bootstrapHost: cli.bootstrapHost ?? null,
    bootstrapPort: cli.bootstrapPort ?? null,
    bootstrapOnHttpPort: cli.bootstrapOnHttpPort === true,
    peerAllow: cli.peerAllow,
    stopTtlMs: cli.stopTtlMs,
    maxTrackedAttempts: cli.maxTrackedAttempts,
    maxActiveAttempts: cli.maxActiveAttempts,
    preparedTtlMs: cli.preparedTtlMs,
    maxPrepared: cli.maxPrepared,
    handoffTtlMs: cli.handoffTtlMs,
    metaserverWaitMs: cli.metaserverWaitMs,
    peerTimeoutMs: cli.peerTimeoutMs,
    engineTimeoutMs: cli.engineTimeoutMs,
    engineConnections: cli.engineConnections,
    maxBodyBytes: cli.maxBodyBytes,
    headersTimeoutMs: cli.headersTimeoutMs,
    requestTimeoutMs: cli.requestTimeoutMs,
    keepAliveTimeoutMs: cli.keepAliveTimeoutMs,
    idleTimeoutMs: cli.idleTimeoutMs,
    maxConnections: cli.maxConnections,
    // Flags win over the environment (which keeps the keys out of `ps`).
    engineApiKey: nonEmpty(cli.engineApiKey ?? process.env.MOTOR_ENGINE_API_KEY),
    engineAdminApiKey: nonEmpty(cli.engineAdminApiKey ?? process.env.MOTOR_ENGINE_ADMIN_API_KEY),
  };
  const placeholder = placeholderSecretProblems([
    ['--engine-api-key / MOTOR_ENGINE_API_KEY', resolved.engineApiKey],
    ['--engine-admin-api-key / MOTOR_ENGINE_ADMIN_API_KEY', resolved.engineAdminApiKey],
    ['--register-token / MOTOR_ADMIN_TOKEN', cli.registerToken ?? process.env.MOTOR_ADMIN_TOKEN],
  ])[0];
  if (placeholder !== undefined) return placeholder;
  const peer = peerSecretOf(cli.peerSecretFile, process.env[PEER_SECRET_ENV]);
  if (typeof peer === 'string') return peer;
  resolved.peerSecret = peer;
  return bootstrapHostProblem(resolved) ?? resolved;
}

/** `--peer-secret-file`, else `MOTOR_PEER_SECRET` (checked now: a bad one is a one-line start-up error). */
function peerSecretOf(file: string | undefined, env: string | undefined): PeerSecretSource | null | string {
  if (file !== undefined) return { file };
  if (env === undefined || env === '') return null;
  try {
    return { secrets: parsePeerSecrets(env, PEER_SECRET_ENV) };
  } catch (err) {
    return (err as Error).message;
  }
}

/** An empty key (e.g. `MOTOR_ENGINE_API_KEY=`) is no key. */
function nonEmpty(value: string | undefined): string | null {
  return value !== undefined && value.length > 0 ? value : null;
}
