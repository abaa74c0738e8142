import type { Command } from 'commander';
import type { ConfigFlags } from '../config/coordinator-config.js';
import { listenErrorText } from '../common/os-errors.js';
import { CliError, EXIT_BAD_INPUT, firstLine, invalidConfig } from './cli-error.js';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function registerCoordinator(program: Command): void {
  program
    .command('coordinator')
    .description('OpenAI-compatible gateway that dispatches each request over a prefill/decode pair')
    .option('-c, --config <file>', 'YAML config file (env MOTOR_CONFIG)')
    .option('--host <host>', 'listen address (env MOTOR_HOST; config server.host)')
    .option('--port <port>', 'listen port, 0 = any free port (env MOTOR_PORT; config server.port)')
    .option('--api-key <key>', 'accepted API key, repeatable (env MOTOR_API_KEYS, comma-separated)', collect)
    .option('--set <path=value>', 'override any config key, value parsed as YAML, repeatable', collect)
    .action(async (flags: ConfigFlags) => {
      // Loaded here, not at the top, so other commands do not pay for the coordinator's modules.
      const [
        { createLogger },
        { onShutdown },
        { ConfigError, loadCoordinatorConfig },
        { startCoordinator },
        { RegistryError },
        { StructuredFileError },
      ] = await Promise.all([
        import('../common/logger.js'),
        import('../common/shutdown.js'),
        import('../config/coordinator-config.js'),
        import('../coordinator/coordinator.js'),
        import('../registry/instance-record.js'),
        import('../common/structured-file.js'),
      ]);
      const log = createLogger('motor-coordinator');
      let config;
      try {
        config = await loadCoordinatorConfig(flags);
      } catch (err) {
        if (err instanceof StructuredFileError) throw new CliError(err.message, EXIT_BAD_INPUT);
        if (!(err instanceof ConfigError)) throw err;
        throw invalidConfig(err.issues);
      }
      if (
        config.instances.length === 0 &&
        config.management.port === null &&
        config.registry.store === 'memory'
      )
        // nothing can ever be routed: no static instance and no way to register one
        log.warn(
          'empty fleet: no instances in the config, no management port and no etcd registry; ' +
            'every request will fail',
        );
      // Signals are handled from the start: one that arrives after the `listening` line but before
      // start-up has finished (the management port, scheduling) still gets its drain and shutdown line.
      const starting = startCoordinator(config, log);
      starting.catch(() => {}); // reported below
      onShutdown(async (signal) => {
        const running = await starting;
        const inFlight = running.inFlight();
        const graceMs = config.server.shutdownGraceMs;
        const started = Date.now();
        const cut = await running.drain(graceMs);
        // one line: what stopped it, what was running, and whether the drain finished it all
        log.info(
          {
            signal,
            in_flight: inFlight,
            grace_ms: graceMs,
            drained: cut === 0,
            cut,
            ms: Date.now() - started,
          },
          'shutdown',
        );
      });
      try {
        await starting;
      } catch (err) {
        // etcd unreachable, a static instance the registry refuses
        if (err instanceof RegistryError) throw new CliError(firstLine(err.message));
        const listen = listenErrorText(err);
        if (listen === undefined) throw err;
        const port = (err as { port?: unknown }).port;
        const key = port === config.management.port ? 'management.port' : 'server.port';
        throw new CliError(`${listen} (${key})`);
      }
    });
}
