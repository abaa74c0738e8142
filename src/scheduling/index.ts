/**
 * Motor's scheduling library: capability-aware P/D pair selection (filters → weighted scorers → picker
 * per role), load tracking, engine-metrics staleness, prefix-cache affinity, circuit breakers and
 * admission control. Pure and synchronous on the request path except {@link AdmissionController.acquire}.
 */
export * from './types.js';
export {
  Scheduler,
  type ExplainOptions,
  type FleetSummary,
  type RouteExplanation,
  type SchedulerOptions,
  type SchedulerStats,
} from './scheduler.js';
export {
  parseSchedulingConfig,
  schedulingConfigSchema,
  SchedulingConfigError,
  type SchedulingConfig,
  type SchedulingConfigInput,
  type ProfileConfig,
} from './config.js';
export {
  LoadTracker,
  pendingPrefillTokens,
  type LoadHandle,
  type InstanceLoad,
  type BeginOptions,
  type RequestOutcome,
} from './load-tracker.js';
export {
  EngineMetricsStore,
  type EngineMetricsSnapshot,
  type EngineMetricsStoreOptions,
} from './engine-metrics.js';
export { CircuitBreakers, type CircuitState, type CircuitBreakerOptions } from './circuit-breaker.js';
export {
  AdmissionController,
  type AdmissionOptions,
  type AdmissionRequest,
  type AdmissionResult,
  type AdmissionTicket,
  type AdmissionRejection,
  type AdmissionRejectionReason,
} from './admission.js';
export { TokenBucketLimiter, type TokenBucketOptions, type TakeResult } from './token-bucket-limiter.js';
export { seededRandom, type RandomSource } from './seeded-random.js';
export { PrefixIndex, type IndexSnapshot, type PrefixIndexOptions } from './prefix-index.js';
export { tokenBlockHashes, textBlockHashes, DEFAULT_BLOCK_SIZE, CHARS_PER_TOKEN } from './prefix-hash.js';
export {
  schedulingPlugins,
  findPlugin,
  pluginTypes,
  PluginCatalog,
  builtinPlugins,
  type AnyPluginDefinition,
} from './plugin-registry.js';
export { definePlugin, instanceWeight, scoresFromCosts } from './plugin.js';
export type {
  Filter,
  Scorer,
  Picker,
  PluginDefinition,
  PluginKind,
  SelectionContext,
  SchedulingServices,
} from './plugin.js';
