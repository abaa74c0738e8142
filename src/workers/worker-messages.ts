import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/**
 * The IPC messages between `motor coordinator --workers N`'s primary and its workers (node:cluster's
 * channel). One `type` namespace (`motor:`) so they never meet prom-client's or Node's own messages.
 */
export type WorkerMessage =
  /**
   * worker → primary: started and listening (its gateway URL, and the loopback port of its own where
   * other workers pass it metaserver calls); the primary's start-up waits for every one.
   */
  | { type: 'motor:ready'; url: string; metaserverPort: number }
  /** worker → primary: start-up failed; the one line the primary prints, and the exit code. */
  | { type: 'motor:failed'; message: string; exitCode: number }
  /** worker → primary: a `/metrics` request; the primary answers with the whole cluster's text. */
  | { type: 'motor:metrics-req'; id: number }
  /** worker → primary: this worker's metrics, for the collection `id`. */
  | { type: 'motor:metrics-part'; id: number; metrics: MetricObjectWithValues<MetricValue<string>>[] };

export type PrimaryMessage =
  /** primary → worker: drain and exit (the primary got `signal`). */
  | { type: 'motor:shutdown'; signal: string }
  /** primary → worker: the other workers' metaserver ports (sent whenever a worker comes or goes). */
  | { type: 'motor:peers'; metaserverPorts: number[] }
  /** primary → worker: send your metrics as collection `id`. */
  | { type: 'motor:metrics-collect'; id: number }
  /** primary → worker: the answer to `metrics-req` `id` (body, or error). */
  | { type: 'motor:metrics-res'; id: number; contentType: string; body: string; error?: string };

/** A message of this namespace (anything else on the channel is someone else's). */
export function isMotorMessage<T extends { type: string }>(message: unknown): message is T {
  return (
    typeof message === 'object' &&
    message !== null &&
    typeof (message as { type?: unknown }).type === 'string' &&
    (message as { type: string }).type.startsWith('motor:')
  );
}
