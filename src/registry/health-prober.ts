import { Agent, request } from 'undici';
import type { Logger } from '../common/logger.js';
import { systemClock, type Clock, type TimerHandle } from '../common/clock.js';
import type { InstanceRecord } from './instance-record.js';
import type { Registry } from './registry.js';

export type HealthStatus = 'unknown' | 'healthy' | 'unhealthy';

export interface InstanceHealth {
  status: HealthStatus;
  consecutive_failures: number;
  consecutive_successes: number;
  last_probe_at_ms: number | null;
  last_error: string | null;
  changed_at_ms: number;
}

/** Probes one instance; resolves when healthy, rejects (with a reason) when not. Must honour `signal`. */
export type ProbeFunction = (instance: InstanceRecord, signal: AbortSignal) => Promise<void>;

export interface HealthProberOptions {
  /** Time between the end of one probe and the next. 0 disables active probing. Default 2000. */
  intervalMs?: number;
  /** A probe slower than this fails. Default 1000. */
  timeoutMs?: number;
  /** Consecutive failures (probes or passive reports) that make an instance unhealthy. Default 3. */
  unhealthyAfter?: number;
  /** Consecutive successes that bring an unhealthy instance back. Default 2. */
  healthyAfter?: number;
  /** Default `/health`. */
  path?: string;
  timers?: Clock;
  /** Replaces the HTTP probe (tests). */
  probe?: ProbeFunction;
  logger?: Logger;
}

export type HealthListener = (id: string, health: InstanceHealth, previous: HealthStatus) => void;

/**
 * Health of every registered instance, from active `/health` probes and passive signals reported by
 * dispatch. A new instance is `unknown` (not routable) and probed at once; one success makes it
 * healthy. After `unhealthyAfter` consecutive failures it is `unhealthy` until `healthyAfter`
 * consecutive successes. With active probing disabled, instances start healthy and only passive
 * signals move them. Health is per coordinator replica (each replica probes for itself).
 */
export class HealthProber {
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  private readonly unhealthyAfter: number;
  private readonly healthyAfter: number;
  private readonly path: string;
  private readonly timers: Clock;
  private readonly probe: ProbeFunction;
  private readonly logger: Logger | undefined;
  private readonly agent: Agent | undefined;
  private readonly states = new Map<string, InstanceHealth>();
  private readonly scheduled = new Map<string, TimerHandle>();
  private readonly probing = new Map<string, AbortController>();
  private readonly listeners = new Set<HealthListener>();
  private unwatch: (() => void) | undefined;

  constructor(
    private readonly registry: Registry,
    options: HealthProberOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 2000;
    this.timeoutMs = options.timeoutMs ?? 1000;
    this.unhealthyAfter = Math.max(1, options.unhealthyAfter ?? 3);
    this.healthyAfter = Math.max(1, options.healthyAfter ?? 2);
    this.path = options.path ?? '/health';
    this.timers = options.timers ?? systemClock;
    this.logger = options.logger;
    if (options.probe) this.probe = options.probe;
    else {
      const agent = new Agent({ keepAliveTimeout: 10_000, connections: 2 });
      this.agent = agent;
      this.probe = (instance, signal) => httpProbe(agent, `${instance.url}${this.path}`, signal);
    }
  }

  /** Follows the registry (including instances already registered) and starts probing. */
  start(): this {
    if (this.unwatch) return this;
    this.unwatch = this.registry.watch(
      (event) => {
        if (event.type === 'add') this.track(event.instance.id);
        else if (event.type === 'update' && event.instance.url !== event.previous.url)
          this.reset(event.instance.id);
        else if (event.type === 'remove') this.untrack(event.instance.id);
      },
      { replay: true },
    );
    return this;
  }

  async stop(): Promise<void> {
    this.unwatch?.();
    this.unwatch = undefined;
    for (const id of [...this.states.keys()]) this.untrack(id);
    this.listeners.clear();
    await this.agent?.close();
  }

  health(id: string): InstanceHealth | undefined {
    const state = this.states.get(id);
    return state ? { ...state } : undefined;
  }

  isHealthy(id: string): boolean {
    return this.states.get(id)?.status === 'healthy';
  }

  /** Routable = registered, `active` (not draining/paused) and healthy. */
  isRoutable(id: string): boolean {
    return this.registry.get(id)?.state === 'active' && this.isHealthy(id);
  }

  /** The instances a scheduler may pick now. */
  routable(): InstanceRecord[] {
    return this.registry.list().filter((r) => r.state === 'active' && this.isHealthy(r.id));
  }

  /** Passive signal from dispatch: a request to this instance failed (connection error, 5xx, timeout). */
  reportFailure(id: string, error = 'request failed'): void {
    this.record(id, false, error);
  }

  /** Passive signal from dispatch: a request to this instance succeeded. */
  reportSuccess(id: string): void {
    this.record(id, true, null);
  }

  /** Health transitions (`unknown → healthy`, `healthy → unhealthy`, ...). Returns unsubscribe. */
  onChange(listener: HealthListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Probes one instance now (outside the schedule) and resolves with its health afterwards. */
  async probeNow(id: string): Promise<InstanceHealth | undefined> {
    await this.runProbe(id);
    return this.health(id);
  }

  private track(id: string): void {
    if (this.states.has(id)) return;
    const active = this.intervalMs > 0;
    this.states.set(id, {
      status: active ? 'unknown' : 'healthy',
      consecutive_failures: 0,
      consecutive_successes: 0,
      last_probe_at_ms: null,
      last_error: null,
      changed_at_ms: this.timers.now(),
    });
    if (active) this.schedule(id, 0);
  }

  private reset(id: string): void {
    this.untrack(id);
    this.track(id);
  }

  private untrack(id: string): void {
    const handle = this.scheduled.get(id);
    if (handle) this.timers.clearTimeout(handle);
    this.scheduled.delete(id);
    this.probing.get(id)?.abort();
    this.probing.delete(id);
    this.states.delete(id);
  }

  private schedule(id: string, delayMs: number): void {
    const handle = this.timers.setTimeout(() => {
      this.scheduled.delete(id);
      void this.runProbe(id).finally(() => {
        if (this.states.has(id) && this.unwatch && !this.scheduled.has(id))
          this.schedule(id, this.intervalMs);
      });
    }, delayMs);
    this.scheduled.set(id, handle);
  }

  private async runProbe(id: string): Promise<void> {
    const instance = this.registry.get(id);
    if (!instance || !this.states.has(id) || this.probing.has(id)) return;
    const controller = new AbortController();
    this.probing.set(id, controller);
    let timer: TimerHandle | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = this.timers.setTimeout(() => {
        controller.abort();
        reject(new Error(`timed out after ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    let error: string | null = null;
    try {
      await Promise.race([this.probe(instance, controller.signal), timeout]);
    } catch (err) {
      error = (err as Error).message || String(err);
    } finally {
      if (timer) this.timers.clearTimeout(timer);
    }
    if (this.probing.get(id) !== controller) return; // untracked or reset meanwhile
    this.probing.delete(id);
    const state = this.states.get(id);
    if (state) state.last_probe_at_ms = this.timers.now();
    this.record(id, error === null, error);
  }

  private record(id: string, ok: boolean, error: string | null): void {
    const state = this.states.get(id);
    if (!state) return;
    const previous = state.status;
    if (ok) {
      state.consecutive_successes++;
      state.consecutive_failures = 0;
      state.last_error = null;
      if (
        previous === 'unknown' ||
        (previous === 'unhealthy' && state.consecutive_successes >= this.healthyAfter)
      ) {
        state.status = 'healthy';
      }
    } else {
      state.consecutive_failures++;
      state.consecutive_successes = 0;
      state.last_error = error;
      if (previous !== 'unhealthy' && state.consecutive_failures >= this.unhealthyAfter)
        state.status = 'unhealthy';
    }
    if (state.status === previous) return;
    state.changed_at_ms = this.timers.now();
    this.logger?.info({ id, status: state.status, previous, error }, 'instance health changed');
    for (const listener of [...this.listeners]) {
      try {
        listener(id, { ...state }, previous);
      } catch (err) {
        this.logger?.error({ err, id }, 'health listener threw');
      }
    }
  }
}

/** GET `url`; any 2xx is healthy. The body is discarded. */
export async function httpProbe(agent: Agent, url: string, signal: AbortSignal): Promise<void> {
  const res = await request(url, { method: 'GET', dispatcher: agent, signal });
  await res.body.dump();
  if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`HTTP ${res.statusCode}`);
}
