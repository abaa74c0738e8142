import type { Logger } from '../../common/logger.js';
import type { ResolvedInstance } from '../../config/coordinator-config.js';
import type { HealthProber, Registry } from '../../registry/index.js';
import { probeInstance, type JsonGetter } from './discovery-probe.js';
import { pendingOutcome, reconcile, type DiscoveryOutcome } from './discovery-reconcile.js';

export interface InstanceDiscoveryOptions {
  registry: Registry;
  health: HealthProber;
  /** Only the config's instances are discovered: registered ones bring their own capabilities. */
  staticInstances: readonly ResolvedInstance[];
  get: JsonGetter;
  /** Bound of every discovery request. */
  timeoutMs: number;
  /** A direct-mode instance's engine API key, sent as `Authorization: Bearer`. */
  apiKeyFor?: (id: string) => string | undefined;
  log?: Logger;
}

/**
 * Asks each static instance what it is (proxy `/v1/motor/info`, SGLang `/server_info`, `/v1/models`)
 * when it is registered and again each time its health turns healthy — never on the request path.
 * The outcome per instance is kept here, per coordinator replica (like health), and read by the
 * instance source; the registry record stays what the config says.
 */
export class InstanceDiscovery {
  private readonly outcomes = new Map<string, DiscoveryOutcome>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly configured: Map<string, ResolvedInstance>;
  private readonly listeners = new Set<(id: string) => void>();
  private readonly unsubscribe: Array<() => void> = [];
  private closed = false;

  constructor(private readonly options: InstanceDiscoveryOptions) {
    this.configured = new Map(options.staticInstances.map((i) => [i.id, i]));
    for (const instance of options.staticInstances) this.outcomes.set(instance.id, pendingOutcome(instance));
  }

  /**
   * Follows the registry and health (start it after the prober). A registered instance is asked at
   * once when it counts as healthy already (probing off), else at its first healthy probe.
   */
  start(): this {
    const { registry, health } = this.options;
    this.unsubscribe.push(
      registry.watch(
        (event) => {
          if (
            event.type === 'add' &&
            event.instance.source === 'static' &&
            health.isHealthy(event.instance.id)
          )
            this.discover(event.instance.id);
        },
        { replay: true },
      ),
      health.onChange((id, health, previous) => {
        if (health.status === 'healthy' && previous !== 'healthy') this.discover(id);
      }),
    );
    return this;
  }

  /** The current outcome of a static instance; undefined for the others. */
  outcome(id: string): DiscoveryOutcome | undefined {
    return this.outcomes.get(id);
  }

  /** Called with an instance id whose outcome changed. Returns unsubscribe. */
  onChange(listener: (id: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once no discovery is running (start-up waits for it; each request is bounded). */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running.values());
  }

  close(): void {
    this.closed = true;
    for (const off of this.unsubscribe.splice(0)) off();
    this.listeners.clear();
  }

  /** Starts one round for `id` (at its current URL); a request during a round runs one more after it. */
  discover(id: string): void {
    const configured = this.configured.get(id);
    const record = this.options.registry.get(id);
    // A run-time registration of the same id replaced the config's record: it speaks for itself.
    if (!configured || !record || record.source !== 'static' || this.closed) return;
    const instance = { ...configured, url: record.url };
    if (this.running.has(id)) {
      this.again.add(id);
      return;
    }
    const round = this.round(instance)
      .catch((err: unknown) => this.options.log?.error({ err, id }, 'instance discovery failed'))
      .finally(() => {
        this.running.delete(id);
        if (this.again.delete(id)) this.discover(id);
      });
    this.running.set(id, round);
  }

  private async round(instance: ResolvedInstance): Promise<void> {
    const { get, timeoutMs, apiKeyFor } = this.options;
    const probe = await probeInstance(instance, get, timeoutMs, apiKeyFor?.(instance.id));
    if (this.closed) return;
    const outcome = reconcile(instance, probe);
    const previous = this.outcomes.get(instance.id);
    this.outcomes.set(instance.id, outcome);
    if (previous && JSON.stringify(previous) === JSON.stringify(outcome)) return;
    const problems = outcome.blocked !== null ? [outcome.blocked, ...outcome.notes] : outcome.notes;
    if (problems.length > 0)
      this.options.log?.warn({ id: instance.id, url: instance.url, problems }, 'instance discovery');
    else
      this.options.log?.info(
        {
          id: instance.id,
          engine: outcome.engine,
          dispatch_capabilities: outcome.dispatchCapabilities,
          kv_connector: outcome.kvConnector,
          bootstrap_port: outcome.bootstrapPort,
          models: outcome.reportedModels,
        },
        'instance discovered',
      );
    for (const listener of [...this.listeners]) listener(instance.id);
  }
}
