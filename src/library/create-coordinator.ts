import type { Tracer } from '@opentelemetry/api';
import type { Registry } from 'prom-client';
import { createLogger, type Logger } from '../common/logger.js';
import type { RequestListener } from '../common/request-drain.js';
import {
  validateCoordinatorConfig,
  type CoordinatorConfig,
  type CoordinatorConfigInput,
} from '../config/coordinator-config.js';
import { createCoordinatorApp } from '../coordinator/coordinator.js';
import { builtinPlugins, type AnyPluginDefinition } from '../scheduling/plugin-registry.js';

/** What `close()` waits for in-flight requests by default before cutting them. */
export const DEFAULT_CLOSE_GRACE_MS = 30_000;

export interface CreateCoordinatorOptions {
  /** A pino logger (default: pino on stdout at `MOTOR_LOG_LEVEL`, else `warn`, named `motor-coordinator`). */
  logger?: Logger;
  /** Motor's metrics are registered on this prom-client Registry (default: a registry of its own). */
  registry?: Registry;
  /** Request and leg spans go to this OpenTelemetry tracer (default: `observability.tracing`). */
  tracer?: Tracer;
  /** Scheduling plugins the config may name besides the built-ins (`definePlugin`); types must be new. */
  plugins?: readonly AnyPluginDefinition[];
  /** Where `*Env` keys (`apiKeyEnv`, `server.tenantSaltSecretEnv`) are read; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** One embedded coordinator (docs/library.md). */
export interface Coordinator {
  /** The OpenAI-compatible gateway as a `node:http` request listener: `/v1/*`, `/health`, `/ready` (+ `/metrics`, `/dashboard` when on). */
  handler: RequestListener;
  /** The management API (docs/control-plane.md) as a request listener, for a port or path of your choosing. */
  managementHandler: RequestListener;
  /** `GET` anything: the coordinator's metrics in Prometheus text. */
  metricsHandler: RequestListener;
  /** The validated config, every default filled in. */
  config: CoordinatorConfig;
  /** The registry Motor's metrics live on (the injected one, or its own). */
  registry: Registry;
  /** Requests being answered by the three listeners now. */
  inFlight(): number;
  /**
   * Stops taking requests (new ones get 503 `overloaded` with `connection: close`), waits for those in
   * flight up to `graceMs` (default 30 s), cuts the rest, then stops health probes, the registry,
   * engine connections and Motor's own tracer. Does not close your server. Safe to call twice.
   */
  close(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Validates `config` (the object `motor coordinator`'s YAML describes; errors name the path, as a
 * `ConfigError`), connects the registry and probes the configured instances, and returns request
 * listeners to mount in any `node:http` server. Opens no port: `server.host`, `server.port`, the
 * `server.*` connection limits and `management.port` / `management.host` belong to `motor coordinator`.
 */
export async function createCoordinator(
  config: CoordinatorConfigInput,
  options: CreateCoordinatorOptions = {},
): Promise<Coordinator> {
  const plugins = options.plugins?.length ? builtinPlugins.with(options.plugins) : undefined;
  const resolved = validateCoordinatorConfig(config, options.env ?? process.env, plugins);
  const log = options.logger ?? createLogger('motor-coordinator', process.env.MOTOR_LOG_LEVEL ?? 'warn');
  const app = await createCoordinatorApp(resolved, log, {
    observability: {
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.tracer ? { tracer: options.tracer } : {}),
    },
  });
  let closing: Promise<void> | null = null;
  return {
    handler: app.handler,
    // a coordinator without a source override always has its control plane
    managementHandler: app.managementHandler!,
    metricsHandler: app.metricsHandler,
    config: resolved,
    registry: app.observability.metrics.registry,
    inFlight: app.inFlight,
    close(closeOptions = {}) {
      closing ??= app.close(closeOptions.graceMs ?? DEFAULT_CLOSE_GRACE_MS).then(() => undefined);
      return closing;
    },
  };
}
