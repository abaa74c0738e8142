import { request } from 'undici';
import type { Logger } from '../common/logger.js';
import type { InstanceRecord, InstanceRegistration } from './instance-record.js';
import { MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS } from './management-api.js';

export interface RegisterWithCoordinatorOptions {
  /** Heartbeat period. Default 2000 ms. */
  intervalMs?: number;
  /** Lease TTL the coordinator applies; without a heartbeat for this long the instance expires. Default 3 × interval. */
  leaseTtlMs?: number;
  /** The coordinator's management admin token, if it requires one. */
  adminToken?: string;
  /** Per-request timeout. Default min(interval, 5000) ms. */
  requestTimeoutMs?: number;
  logger?: Logger;
}

export interface CoordinatorRegistration {
  readonly id: string;
  /**
   * Resolves with the stored record after the first successful registration (transient failures —
   * coordinator not up yet, 5xx — are retried). Rejects when the coordinator refuses the
   * registration (4xx: invalid body, bad token) or when closed first.
   */
  readonly registered: Promise<InstanceRecord>;
  /**
   * Stops heartbeating and deregisters (`DELETE`). With `drainTimeoutMs`, first drains and waits up
   * to that long for the coordinator's in-flight requests to this instance to finish.
   */
  close(options?: { drainTimeoutMs?: number }): Promise<void>;
}

class RefusedError extends Error {}

/**
 * Self-registration for `motor engine-proxy --register <coordinator management URL>`: registers
 * with a heartbeat lease, heartbeats every `intervalMs`, re-registers when the coordinator has
 * forgotten the instance (lease expired, coordinator restarted, other replica), and deregisters on
 * close. Re-registration is an upsert that keeps an operator's drain/pause in place.
 */
export function registerWithCoordinator(
  coordinatorUrl: string,
  registration: InstanceRegistration,
  options: RegisterWithCoordinatorOptions = {},
): CoordinatorRegistration {
  const base = coordinatorUrl.replace(/\/+$/, '');
  const intervalMs = options.intervalMs ?? 2000;
  const leaseTtlMs = Math.min(
    MAX_LEASE_TTL_MS,
    Math.max(MIN_LEASE_TTL_MS, options.leaseTtlMs ?? 3 * intervalMs),
  );
  const timeoutMs = options.requestTimeoutMs ?? Math.min(intervalMs, 5000);
  const log = options.logger;
  const id = registration.id;
  const instancePath = `${base}/v1/instances/${encodeURIComponent(id)}`;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.adminToken) headers.authorization = `Bearer ${options.adminToken}`;

  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> = Promise.resolve();
  let failures = 0;
  let resolveRegistered!: (record: InstanceRecord) => void;
  let rejectRegistered!: (err: Error) => void;
  let isRegistered = false;
  const registered = new Promise<InstanceRecord>((resolve, reject) => {
    resolveRegistered = resolve;
    rejectRegistered = reject;
  });
  registered.catch(() => undefined); // callers need not await it

  const call = async (method: 'POST' | 'DELETE', url: string, body?: unknown) => {
    const res = await request(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.body.text();
    return { status: res.statusCode, text };
  };

  const schedule = (delayMs: number, step: () => Promise<void>): void => {
    if (closed) return;
    timer = setTimeout(() => {
      timer = undefined;
      current = step();
    }, delayMs);
  };

  const retryDelay = (): number => Math.min(intervalMs, 100 * 2 ** Math.min(failures++, 10));

  const registerStep = async (): Promise<void> => {
    if (closed) return;
    try {
      const res = await call('POST', `${base}/v1/instances`, { ...registration, lease_ttl_ms: leaseTtlMs });
      if (res.status === 200 || res.status === 201) {
        failures = 0;
        const record = JSON.parse(res.text) as InstanceRecord;
        if (!isRegistered) {
          isRegistered = true;
          resolveRegistered(record);
        }
        log?.info({ id, coordinator: base, leaseTtlMs }, 'registered with coordinator');
        schedule(intervalMs, heartbeatStep);
        return;
      }
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        throw new RefusedError(`coordinator refused registration of ${id}: HTTP ${res.status} ${res.text}`);
      }
      throw new Error(`HTTP ${res.status}`);
    } catch (err) {
      if (err instanceof RefusedError) {
        log?.error({ id, err: err.message }, 'registration refused; not retrying');
        closed = true;
        rejectRegistered(err);
        return;
      }
      log?.warn({ id, err: (err as Error).message }, 'registration failed; retrying');
      schedule(retryDelay(), registerStep);
    }
  };

  const heartbeatStep = async (): Promise<void> => {
    if (closed) return;
    try {
      const res = await call('POST', `${instancePath}/heartbeat`);
      if (res.status === 200) {
        failures = 0;
        schedule(intervalMs, heartbeatStep);
        return;
      }
      if (res.status === 404) {
        log?.warn({ id }, 'coordinator forgot this instance; registering again');
        current = registerStep();
        return;
      }
      throw new Error(`HTTP ${res.status}`);
    } catch (err) {
      log?.warn({ id, err: (err as Error).message }, 'heartbeat failed');
      schedule(intervalMs, heartbeatStep);
    }
  };

  current = registerStep();

  return {
    id,
    registered,
    async close(closeOptions = {}) {
      if (closed && !isRegistered) {
        await current;
        return;
      }
      closed = true;
      if (timer) clearTimeout(timer);
      await current;
      if (!isRegistered) {
        rejectRegistered(new Error(`registration of ${id} closed before it succeeded`));
        return;
      }
      try {
        if (closeOptions.drainTimeoutMs !== undefined) {
          const res = await request(`${instancePath}/drain`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ wait_ms: closeOptions.drainTimeoutMs }),
            signal: AbortSignal.timeout(closeOptions.drainTimeoutMs + timeoutMs),
          });
          await res.body.dump();
        }
        const res = await call('DELETE', instancePath);
        if (res.status !== 200 && res.status !== 404) throw new Error(`HTTP ${res.status}`);
        log?.info({ id }, 'deregistered from coordinator');
      } catch (err) {
        // The lease expires on its own; deregistration is best effort.
        log?.warn({ id, err: (err as Error).message }, 'deregistration failed; the lease will expire');
      }
    },
  };
}
