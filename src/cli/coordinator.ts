import type { Command } from 'commander';
import type { ConfigFlags, CoordinatorConfig } from '../config/coordinator-config.js';
import type { Logger } from '../common/logger.js';
import type { RunningCoordinator } from '../coordinator/coordinator.js';
import { parseWorkers } from '../workers/workers-count.js';
import {
  CliError,
  EXIT_BAD_INPUT,
  EXIT_FAILED,
  EXIT_UNAVAILABLE,
  firstLine,
  invalidConfig,
  listenError,
} from './cli-error.js';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

type CoordinatorFlags = ConfigFlags & { workers?: string };

export function registerCoordinator(program: Command): void {
  program
    .command('coordinator')
    .description('OpenAI-compatible gateway that dispatches each request over a prefill/decode pair')
    .option('-c, --config <file>', 'YAML config file (env MOTOR_CONFIG)')
    .option('--host <host>', 'listen address (env MOTOR_HOST; config server.host)')
    .option('--port <port>', 'listen port, 0 = any free port (env MOTOR_PORT; config server.port)')
    .option('--api-key <key>', 'accepted API key, repeatable (env MOTOR_API_KEYS, comma-separated)', collect)
    .option('--set <path=value>', 'override any config key, value parsed as YAML, repeatable', collect)
    .option(
      '--workers <n|auto>',
      'processes sharing the listening port (node:cluster), auto = one per CPU; default 1 (docs/coordinator.md "Workers")',
    )
    .action(async (flags: CoordinatorFlags) => {
      const parsed = parseWorkers(flags.workers ?? '1');
      if ('problem' in parsed) throw new CliError(parsed.problem, EXIT_BAD_INPUT);
      const { workers } = parsed;
      // Loaded here, not at the top, so other commands do not pay for the coordinator's modules.
      const [{ createLogger }, cluster, { ConfigError, loadCoordinatorConfig }, { StructuredFileError }] =
        await Promise.all([
          import('../common/logger.js'),
          workers > 1 ? import('node:cluster').then((m) => m.default) : null,
          import('../config/coordinator-config.js'),
          import('../common/structured-file.js'),
        ]);
      const worker = cluster?.isWorker ? await import('../workers/worker-role.js') : null;
      const base = createLogger('motor-coordinator');
      const log = cluster?.isWorker ? base.child({ worker: cluster.worker!.id }) : base;
      let config: CoordinatorConfig;
      try {
        if (worker) {
          const { workerConfigOverrides } = await import('../workers/worker-env.js');
          flags = { ...flags, set: [...(flags.set ?? []), ...workerConfigOverrides(process.env)] };
        }
        config = await loadCoordinatorConfig(flags);
      } catch (err) {
        if (err instanceof StructuredFileError) throw new CliError(err.message, EXIT_BAD_INPUT);
        if (!(err instanceof ConfigError)) throw err;
        throw invalidConfig(err.issues);
      }
      if (
        !worker &&
        config.instances.length === 0 &&
        config.management.port === null &&
        config.registry.store === 'memory'
      )
        // nothing can ever be routed: no static instance and no way to register one
        log.warn(
          'empty fleet: no instances in the config, no management port and no etcd registry; ' +
            'every request will fail',
        );
      if (!worker) {
        // its own ports first: a busy port is the answer, before the fleet is read or probed
        const { assertPortFree } = await import('./port-free.js');
        await assertPortFree(config.server.host, config.server.port, 'server.port');
        if (config.management.port !== null)
          await assertPortFree(config.management.host, config.management.port, 'management.port');
        const neverRoutes = await staticFleetNeverRoutes(config);
        if (neverRoutes?.refuse) throw new CliError(neverRoutes.message, EXIT_BAD_INPUT);
        if (neverRoutes) log.warn(neverRoutes.message);
      }
      if (cluster?.isPrimary) return runWorkersPrimary(config, workers, log);
      const [{ onShutdown }, { startCoordinator }] = await Promise.all([
        import('../common/shutdown.js'),
        import('../coordinator/coordinator.js'),
      ]);
      // Signals are handled from the start: one that arrives after the `listening` line but before
      // start-up has finished (the management port, scheduling) still gets its drain and shutdown line.
      // A worker's role is made first (startCoordinator takes its gateway front); `starting` is set
      // before the event loop can deliver it a signal or a message.
      const role = worker ? new worker.WorkerRole((signal) => shutdown(signal)) : null;
      const starting = startCoordinator(config, log, role ? { frontGateway: role.frontGateway } : {});
      starting.catch(() => {}); // reported below
      const shutdown = (signal: string): Promise<void> => drainAndLog(starting, config, log, signal);
      if (!role) onShutdown(shutdown);
      let running: RunningCoordinator;
      try {
        running = await starting;
      } catch (err) {
        const error = await startupError(err, config);
        if (role && error) return role.failed(error.message, error.exitCode);
        throw error ?? err;
      }
      role?.attach(running.observability.metrics);
      await role?.ready(running.url);
    });
}

/** The drain on SIGTERM/SIGINT, and its one line: what stopped it, what was running, how it went. */
async function drainAndLog(
  starting: Promise<RunningCoordinator>,
  config: CoordinatorConfig,
  log: Logger,
  signal: string,
): Promise<void> {
  const running = await starting;
  const inFlight = running.inFlight();
  const graceMs = config.server.shutdownGraceMs;
  const started = Date.now();
  const cut = await running.drain(graceMs);
  log.info(
    { signal, in_flight: inFlight, grace_ms: graceMs, drained: cut === 0, cut, ms: Date.now() - started },
    'shutdown',
  );
}

/** The one-line form of a start-up failure (etcd unreachable, a refused instance, a busy port), or undefined. */
async function startupError(err: unknown, config: CoordinatorConfig): Promise<CliError | undefined> {
  const { RegistryError } = await import('../registry/instance-record.js');
  if (err instanceof RegistryError) {
    const code =
      err.code === 'unavailable'
        ? EXIT_UNAVAILABLE
        : err.code === 'invalid_instance'
          ? EXIT_BAD_INPUT
          : EXIT_FAILED;
    return new CliError(firstLine(err.message), code);
  }
  const port = (err as { port?: unknown }).port;
  return listenError(err, port === config.management.port ? 'management.port' : 'server.port');
}

/**
 * A fleet that is fixed for the process's life (every instance direct, so its capabilities are known
 * now; no management port and no etcd, so none can be added) and gives some model no route can never
 * serve it: the scheduler's own reason, which names the role or key that is missing.
 */
async function staticFleetNeverRoutes(
  config: CoordinatorConfig,
): Promise<{ message: string; refuse: boolean } | null> {
  const { instances, management, registry, scheduling } = config;
  if (instances.length === 0 || management.port !== null || registry.store !== 'memory') return null;
  if (instances.some((i) => i.mode !== 'direct')) return null;
  const { topologyReport } = await import('../coordinator/gateway/readiness.js');
  const report = topologyReport(
    instances.map((i) => ({ ...i, inFlight: 0 })),
    {
      unionFallback: scheduling.library.fallback.union,
      degradedPrefill: scheduling.library.fallback.degradedPrefill,
      planPreference: scheduling.library.planPreference,
    },
  );
  if (report.ready) return null;
  const why = Object.values(report.models).find((route) => route.startsWith('no ')) ?? 'no route';
  const message = `this fleet can never route: ${why} (every instance is direct and none can register: no management.port, registry.store memory)`;
  // Pairs whose known profiles share no dispatch plan ("decode instances lack …") start anyway,
  // unready, and answer 503 naming the missing capability: such a fleet fails closed at request time.
  // Only a missing role or an instance with no known profile is refused here.
  return { message, refuse: !why.includes(' instances lack ') };
}

/** `--workers N` in the primary: checks the config can be shared, then forks and supervises the workers. */
async function runWorkersPrimary(config: CoordinatorConfig, workers: number, log: Logger): Promise<void> {
  const [{ workersProblem }, { sharedWorkerEnv }, { runPrimary }] = await Promise.all([
    import('../workers/workers-compat.js'),
    import('../workers/worker-env.js'),
    import('../workers/workers-primary.js'),
  ]);
  const problem = workersProblem(config, workers);
  if (problem !== null) throw new CliError(problem, EXIT_BAD_INPUT);
  await runPrimary({ workers, log, env: sharedWorkerEnv(config.server) });
}
