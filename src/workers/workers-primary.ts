import cluster, { type Worker } from 'node:cluster';
import { logListening, type Logger } from '../common/logger.js';
import { CliError } from '../cli/cli-error.js';
import { aggregateWorkerMetrics, type WorkerMetrics } from './cluster-metrics.js';
import { RestartBudget } from './restart-budget.js';
import { isMotorMessage, type PrimaryMessage, type WorkerMessage } from './worker-messages.js';

/** The `listening` line's server name once every worker listens (spawnMotor's `waitFor: ['workers']`). */
export const WORKERS_LISTENING = 'workers';
/** A `/metrics` collection waits this long for every worker's part before answering 500. */
const COLLECT_TIMEOUT_MS = 5_000;

export interface PrimaryOptions {
  workers: number;
  log: Logger;
  /** Variables every worker gets besides the primary's environment (shared secrets). */
  env?: Record<string, string>;
  /** Crashed workers replaced at most `max` times in any `windowMs` (default 5 per minute). */
  restarts?: { max: number; windowMs: number };
}

interface Collection {
  parts: WorkerMetrics[];
  waiting: Set<number>;
  timer: NodeJS.Timeout;
  done: (err: Error | null) => void;
}

/**
 * `motor coordinator --workers N`'s primary: forks N workers (each a whole coordinator; node:cluster
 * shares the one listening port, the primary accepting connections and handing them round-robin),
 * logs one `listening` line (`server: "workers"`) once all listen, answers their `/metrics` with the
 * whole cluster's metrics, replaces a crashed worker (bounded), and on SIGTERM/SIGINT has every worker
 * drain, then exits 0 (1 if a worker did not exit cleanly). A second signal kills the workers at once.
 * Resolves once every worker listens; rejects with the first worker's one-line start-up error.
 */
export function runPrimary(opts: PrimaryOptions): Promise<void> {
  const { workers, log } = opts;
  const budget = new RestartBudget(opts.restarts?.max ?? 5, opts.restarts?.windowMs ?? 60_000);
  /** Ready workers by id, with their private metaserver port. */
  const ready = new Map<number, number>();
  const collections = new Map<number, Collection>();
  let nextCollection = 0;
  let started = false;
  let stopping: string | null = null;
  let failure: CliError | null = null;
  let cleanExit = true;
  let url = '';

  const live = (): Worker[] =>
    Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
  const send = (w: Worker, message: PrimaryMessage): void => {
    if (w.isConnected()) w.send(message);
  };
  const fork = (): Worker => cluster.fork(opts.env ?? {});

  let settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
  const startup = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));

  /** Tells each ready worker where the others take metaserver calls. */
  const announcePeers = (): void => {
    for (const w of live())
      if (ready.has(w.id))
        send(w, {
          type: 'motor:peers',
          metaserverPorts: [...ready].filter(([id]) => id !== w.id).map(([, port]) => port),
        });
  };

  const stopAll = (reason: string): void => {
    if (stopping !== null) return;
    stopping = reason;
    for (const w of live()) send(w, { type: 'motor:shutdown', signal: reason });
  };

  const collect = (): Promise<WorkerMetrics[]> => {
    const id = nextCollection++;
    const targets = live().filter((w) => w.isConnected() && ready.has(w.id));
    return new Promise((resolve, reject) => {
      const c: Collection = {
        parts: [],
        waiting: new Set(targets.map((w) => w.id)),
        timer: setTimeout(
          () =>
            c.done(
              new Error(
                `worker(s) ${[...c.waiting].join(', ')} did not answer within ${COLLECT_TIMEOUT_MS} ms`,
              ),
            ),
          COLLECT_TIMEOUT_MS,
        ),
        done: (err) => {
          clearTimeout(c.timer);
          collections.delete(id);
          if (err) reject(err);
          else resolve(c.parts);
        },
      };
      collections.set(id, c);
      if (c.waiting.size === 0) return c.done(null);
      for (const w of targets) send(w, { type: 'motor:metrics-collect', id });
    });
  };
  const partDone = (collectionId: number, workerId: number, part: WorkerMetrics | null): void => {
    const c = collections.get(collectionId);
    if (!c || !c.waiting.delete(workerId)) return;
    if (part) c.parts.push(part);
    if (c.waiting.size === 0) c.done(null);
  };

  const onMessage = (worker: Worker, message: unknown): void => {
    if (!isMotorMessage<WorkerMessage>(message)) return;
    switch (message.type) {
      case 'motor:ready':
        ready.set(worker.id, message.metaserverPort);
        url ||= message.url;
        announcePeers();
        if (!started && ready.size === workers) {
          started = true;
          logListening(log, { url, workers }, WORKERS_LISTENING);
          settle!.resolve();
        } else if (started) log.info({ worker: worker.id, pid: worker.process.pid }, 'worker restarted');
        return;
      case 'motor:failed':
        if (!started) {
          failure ??= new CliError(message.message, message.exitCode);
          stopAll('start-up failure');
        } else
          log.error(
            { worker: worker.id, pid: worker.process.pid, error: message.message },
            'worker failed to start',
          );
        return;
      case 'motor:metrics-part':
        partDone(message.id, worker.id, message.metrics);
        return;
      case 'motor:metrics-req':
        collect()
          .then(aggregateWorkerMetrics)
          .then(
            ({ contentType, body }) =>
              send(worker, { type: 'motor:metrics-res', id: message.id, contentType, body }),
            (err: unknown) =>
              send(worker, {
                type: 'motor:metrics-res',
                id: message.id,
                contentType: 'text/plain',
                body: '',
                error: (err as Error).message,
              }),
          );
        return;
    }
  };

  const onExit = (worker: Worker, code: number | null, signal: string | null): void => {
    if (ready.delete(worker.id) && stopping === null) announcePeers();
    for (const [id] of collections) partDone(id, worker.id, null);
    if (code !== 0) cleanExit = false;
    if (stopping === null && started) {
      // a crash after start-up: log it, replace the worker while the budget lasts
      log.error({ worker: worker.id, pid: worker.process.pid, code, signal }, 'worker exited');
      if (budget.take(Date.now())) fork();
      else {
        log.error(
          { restarts: budget.max, window_ms: budget.windowMs },
          'workers keep exiting: restart budget spent, stopping',
        );
        stopAll('restart budget spent');
      }
      return;
    }
    if (stopping === null) {
      // died during start-up without saying why (a bug: its stack is on stderr)
      failure ??= new CliError(`worker ${worker.process.pid} exited with ${code ?? signal} during start-up`);
      stopAll('start-up failure');
    }
    if (live().length > 0) return;
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
    if (failure !== null && !started) settle!.reject(failure);
    else finished(stopping ?? 'exit');
  };

  let signalled: { signal: string; at: number } | null = null;
  const finished = (reason: string): void => {
    const ms = signalled ? Date.now() - signalled.at : 0;
    log.info({ signal: signalled?.signal ?? reason, workers, clean: cleanExit, ms }, 'shutdown');
    log.flush();
    process.exit(signalled !== null && cleanExit ? 0 : 1);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled !== null) {
      // a second signal: no more waiting
      for (const w of live()) w.process.kill('SIGKILL');
      process.exit(130);
    }
    signalled = { signal, at: Date.now() };
    stopAll(signal);
    if (live().length === 0) finished(signal);
  };

  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  for (let i = 0; i < workers; i++) fork();
  return startup;
}
