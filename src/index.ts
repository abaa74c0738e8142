/**
 * `motor-pd`: the coordinator as a library (docs/library.md). `createCoordinator(config)` returns
 * `node:http` request listeners for the gateway, the management API and the metrics.
 */
export {
  createCoordinator,
  DEFAULT_CLOSE_GRACE_MS,
  type Coordinator,
  type CreateCoordinatorOptions,
} from './library/create-coordinator.js';
export type { RequestListener } from './common/request-drain.js';
export {
  ConfigError,
  validateCoordinatorConfig,
  coordinatorConfigSchema,
  type CoordinatorConfig,
  type CoordinatorConfigInput,
} from './config/coordinator-config.js';
export {
  definePlugin,
  instanceWeight,
  scoresFromCosts,
  type AnyPluginDefinition,
  type Filter,
  type Scorer,
  type Picker,
  type PluginDefinition,
  type PluginKind,
  type SelectionContext,
  type SchedulingServices,
  type SchedulableInstance,
  type SchedulingRequest,
  type InstanceRole,
} from './scheduling/index.js';
