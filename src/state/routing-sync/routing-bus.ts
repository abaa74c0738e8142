/** What a bus tells the replica's routing sync. */
export interface BusHandlers {
  /** A message another replica sent to all, or to this replica alone. */
  message(text: string): void;
  /** Connected and subscribed (first time, or again after an outage). */
  up(): void;
  /** Lost the connection (or could not make it); messages sent meanwhile are lost. */
  down(reason: string): void;
}

/**
 * The transport between coordinator replicas' routing state: an existing messaging system (Redis
 * pub/sub between replicas, node:cluster IPC between `--workers`), never a protocol of our own.
 * Fire-and-forget: a message sent while the bus is down is dropped, and the sync catches up by
 * exchanging state when it returns.
 */
export interface RoutingBus {
  readonly kind: string;
  /** Subscribes as `self`; resolves once subscribed or once the first attempt failed (`down` was called). */
  start(self: string, handlers: BusHandlers): Promise<void>;
  /** Sends to every other replica; false when the bus is down (nothing was sent). */
  broadcast(text: string): boolean;
  /** Sends to one replica; false when the bus is down. */
  direct(to: string, text: string): boolean;
  /** How many other replicas listen now (0 when the bus is down). */
  peers(): Promise<number>;
  close(): Promise<void>;
}
