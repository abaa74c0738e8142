import type { Server } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import type { Logger } from '../common/logger.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import { Dispatcher } from './dispatcher.js';
import { createGateway } from './gateway.js';
import { StaticInstanceSource, type InstanceSource } from './instance-source.js';
import { createScheduler, type Scheduler } from './scheduler.js';
import { TriggerRegistry } from './trigger-registry.js';
import { Upstreams } from './upstream.js';

export interface RunningCoordinator {
  url: string;
  server: Server;
  close(): Promise<void>;
}

export interface CoordinatorOverrides {
  source?: InstanceSource;
  scheduler?: Scheduler;
}

/** Wires gateway → dispatcher → scheduler → instance source and starts listening. */
export async function startCoordinator(
  config: CoordinatorConfig,
  log: Logger,
  overrides: CoordinatorOverrides = {},
): Promise<RunningCoordinator> {
  const source = overrides.source ?? new StaticInstanceSource(config.instances);
  const scheduler = overrides.scheduler ?? createScheduler(config.scheduler.policy);
  const upstreams = new Upstreams({ ...config.upstream, connectMs: config.timeouts.connectMs });
  const triggers = new TriggerRegistry();
  let boundUrl = '';
  const dispatcher = new Dispatcher({
    config,
    source,
    scheduler,
    upstreams,
    triggers,
    log,
    publicUrl: () => (config.server.publicUrl ?? boundUrl).replace(/\/+$/, ''),
  });
  const server = createGateway({ config, source, dispatcher, triggers, log });
  boundUrl = await listen(server, config.server.port, config.server.host);
  log.info({ url: boundUrl }, 'listening');
  return {
    url: boundUrl,
    server,
    async close() {
      await closeServer(server);
      await upstreams.close();
    },
  };
}
