import type { Registry } from 'prom-client';
import type { RequestListener } from '../common/request-drain.js';
import { MetaserverForwarder } from './metaserver-forward.js';
import { isMotorMessage, type PrimaryMessage, type WorkerMessage } from './worker-messages.js';

/** What a worker's coordinator gives the primary: its registry and the render `/metrics` calls. */
export interface WorkerMetricsHost {
  registry: Registry;
  render: () => Promise<{ contentType: string; body: string }>;
}

/** A `/metrics` answer from the primary waits this long (it waits up to 5 s for the workers). */
const METRICS_TIMEOUT_MS = 6_000;

/**
 * One worker of `motor coordinator --workers N`: a whole coordinator whose shutdown comes from the
 * primary (or a signal sent to the worker itself, as a terminal's Ctrl-C or systemd's control-group
 * kill do — both at once drain once, not twice), whose `/metrics` shows the whole cluster (asked of
 * the primary), and which tells the primary when it listens or why it could not start.
 */
export class WorkerRole {
  private shuttingDown = false;
  private readonly metaserver = new MetaserverForwarder();
  private gateway: RequestListener | null = null;
  private host: WorkerMetricsHost | null = null;
  private nextRequest = 0;
  private readonly pending = new Map<
    number,
    { resolve: (m: { contentType: string; body: string }) => void; reject: (e: Error) => void }
  >();

  /** `shutdown` drains the coordinator (it may still be starting) and logs its line; the worker then exits 0. */
  constructor(private readonly shutdown: (signal: string) => Promise<unknown>) {
    process.on('message', (message: unknown) => this.onMessage(message));
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => this.stop(signal));
    // the primary is gone (killed): nothing hands this worker connections any more
    process.on('disconnect', () => this.stop('disconnect'));
  }

  /** Serves the cluster's metrics from this worker's `/metrics` and answers the primary's collections. */
  attach(host: WorkerMetricsHost): void {
    this.host = host;
    host.render = () => this.askPrimary();
  }

  /** startCoordinator's `frontGateway`: metaserver calls for another worker's attempts go to it. */
  readonly frontGateway = (
    gateway: RequestListener,
    ownsTrigger: (token: string) => boolean,
  ): RequestListener => {
    this.gateway = gateway;
    return this.metaserver.front(gateway, ownsTrigger);
  };

  /** Opens this worker's private metaserver port, then tells the primary it is ready. */
  async ready(url: string): Promise<void> {
    const metaserverPort = await this.metaserver.listen(this.gateway!);
    this.send({ type: 'motor:ready', url, metaserverPort });
  }

  /** Reports a one-line start-up error to the primary (which prints it once) and exits with `exitCode`. */
  failed(message: string, exitCode: number): void {
    if (!process.connected) process.exit(exitCode);
    process.send!({ type: 'motor:failed', message, exitCode } satisfies WorkerMessage, () =>
      process.exit(exitCode),
    );
  }

  private stop(signal: string): void {
    if (this.shuttingDown) return; // the primary's message and the signal itself: drain once
    this.shuttingDown = true;
    this.shutdown(signal)
      .then(() => this.metaserver.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          console.error(`shutdown after ${signal} failed:`, err);
          process.exit(1);
        },
      );
  }

  private askPrimary(): Promise<{ contentType: string; body: string }> {
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer from the primary within ${METRICS_TIMEOUT_MS} ms`));
      }, METRICS_TIMEOUT_MS);
      this.pending.set(id, {
        resolve: (m) => (clearTimeout(timer), resolve(m)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.send({ type: 'motor:metrics-req', id });
    });
  }

  private onMessage(message: unknown): void {
    if (!isMotorMessage<PrimaryMessage>(message)) return;
    switch (message.type) {
      case 'motor:shutdown':
        this.stop(message.signal);
        return;
      case 'motor:peers':
        this.metaserver.setPeers(message.metaserverPorts);
        return;
      case 'motor:metrics-collect': {
        const registry = this.host?.registry;
        // still starting: an empty part, so the collection does not wait for this worker
        if (!registry) return this.send({ type: 'motor:metrics-part', id: message.id, metrics: [] });
        registry.getMetricsAsJSON().then(
          (metrics) => this.send({ type: 'motor:metrics-part', id: message.id, metrics }),
          () => this.send({ type: 'motor:metrics-part', id: message.id, metrics: [] }),
        );
        return;
      }
      case 'motor:metrics-res': {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.error !== undefined) waiter.reject(new Error(message.error));
        else waiter.resolve({ contentType: message.contentType, body: message.body });
        return;
      }
    }
  }

  private send(message: WorkerMessage): void {
    if (process.connected) process.send!(message);
  }
}
