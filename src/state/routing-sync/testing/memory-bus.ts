import type { BusHandlers, RoutingBus } from '../routing-bus.js';

/** Replicas in one process sharing a bus that tests can take down and bring back. */
export class MemoryBusHub {
  readonly members = new Map<string, BusHandlers>();
  downFlag = false;
  /** Messages delivered (for asserting batching). */
  delivered = 0;

  bus(): RoutingBus {
    let self = '';
    return this.busOf(
      this,
      () => self,
      (id) => (self = id),
    );
  }

  private busOf(hub: MemoryBusHub, selfOf: () => string, setSelf: (id: string) => void): RoutingBus {
    return {
      kind: 'memory',
      async start(id, handlers) {
        setSelf(id);
        hub.members.set(id, handlers);
        if (hub.downFlag) handlers.down('down');
        else handlers.up();
      },
      broadcast(text) {
        if (hub.downFlag) return false;
        for (const [id, h] of hub.members)
          if (id !== selfOf()) queueMicrotask(() => (hub.delivered++, h.message(text)));
        return true;
      },
      direct(to, text) {
        const h = hub.members.get(to);
        if (hub.downFlag || !h) return false;
        queueMicrotask(() => (hub.delivered++, h.message(text)));
        return true;
      },
      async peers() {
        return hub.downFlag ? 0 : hub.members.size - 1;
      },
      async close() {
        hub.members.delete(selfOf());
      },
    };
  }

  setDown(down: boolean): void {
    this.downFlag = down;
    for (const h of this.members.values()) {
      if (down) h.down('test outage');
      else h.up();
    }
  }
}
