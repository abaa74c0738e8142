import type { IncomingMessage, ServerResponse } from 'node:http';

/** A `node:http` request listener (what `http.createServer`, Express and Fastify's raw hooks call). */
export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Counts the responses of the listeners it wraps until each closes, so an owner without a server of
 * its own can stop taking requests and wait for those in flight. Per request: one Set entry and one
 * `close` listener.
 */
export class RequestDrain {
  private readonly open = new Set<ServerResponse>();
  private closing = false;
  private idle: (() => void) | null = null;

  /** Responses started and not yet closed. */
  get inFlight(): number {
    return this.open.size;
  }

  get isClosing(): boolean {
    return this.closing;
  }

  /** `listener`, counted; once `close` has begun, `refuse` answers instead. */
  track(listener: RequestListener, refuse: RequestListener): RequestListener {
    return (req, res) => {
      if (this.closing) return refuse(req, res);
      this.open.add(res);
      res.on('close', () => this.closed(res)); // emitted once per response
      listener(req, res);
    };
  }

  /**
   * Refuses new requests from now on and resolves once every counted response has closed. After
   * `graceMs` (0 = at once) the ones still open are destroyed (their clients see the connection
   * close; streams end without `[DONE]`), and it resolves when those have closed too, with how many
   * were cut (0: every request finished).
   */
  async close(graceMs: number): Promise<number> {
    this.closing = true;
    if (this.open.size === 0) return 0;
    const idle = new Promise<void>((resolve) => (this.idle = resolve));
    let timer: NodeJS.Timeout | undefined;
    if (graceMs > 0) {
      const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(resolve, graceMs, 'expired')));
      if ((await Promise.race([idle, expired])) !== 'expired') {
        clearTimeout(timer);
        return 0;
      }
    }
    const cut = this.open.size;
    for (const res of this.open) res.destroy();
    await idle;
    return cut;
  }

  private closed(res: ServerResponse): void {
    this.open.delete(res);
    if (this.open.size === 0 && this.idle) {
      this.idle();
      this.idle = null;
    }
  }
}
