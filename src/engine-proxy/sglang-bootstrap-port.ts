import type { Logger } from '../common/logger.js';
import {
  parseSglangServerInfo,
  resolveSglangBootstrapPort,
  SGLANG_SERVER_INFO_PATHS,
  type SglangServerInfo,
} from '../engine-adapters/sglang-server-info.js';
import { EngineAuthError } from './engine-credentials.js';
import type { EngineTransport } from './http-clients.js';

export interface LearnBootstrapPortOptions {
  /** `--bootstrap-port`, or null. */
  configured: number | null;
  /** The engine's HTTP port (its URL's), where SGLang's Rust server serves the registry. */
  httpPort?: number | null;
  /** `--bootstrap-on-http-port`: the engine runs SGLang's Rust server (SGLANG_RUST_SERVER=1). */
  onHttpPort?: boolean;
  /** Bound on one info call (ms). */
  timeoutMs: number;
  /** First wait between attempts while the engine is not up (doubles up to `maxRetryMs`). */
  retryMs?: number;
  maxRetryMs?: number;
  /** Aborts the wait (shutdown before the engine came up). */
  signal?: AbortSignal;
}

/** What one round of info calls found: the info, "the engine has no such route", or "not up yet". */
type InfoAnswer =
  { kind: 'info'; info: SglangServerInfo | null } | { kind: 'absent' } | { kind: 'down'; why: string };

/**
 * The bootstrap port of the SGLang prefill behind this proxy, learned before the proxy serves:
 * `GET /server_info` (then `/get_server_info`, older releases) → `disaggregation_bootstrap_port`,
 * else `--bootstrap-port`, else SGLang's 8998 (sgl-project/sglang python/sglang/srt/entrypoints/
 * http_server.py `server_info`, server_args.py `ServerArgs`; fixtures README facts 16, 19).
 * While the engine is not up the proxy waits and asks again (a guessed port would send every decode
 * to the wrong place); an engine that answers 404 on both paths reports nothing, so the configured
 * value or 8998 is used and said so. SGLang's Rust server (`frontend: "rust"` in its info, or
 * `--bootstrap-on-http-port`) serves the registry on its HTTP port (sglang-server-info.ts). A refused
 * API key is fatal ({@link EngineAuthError}).
 */
export async function learnSglangBootstrapPort(
  engine: EngineTransport,
  log: Logger,
  opts: LearnBootstrapPortOptions,
): Promise<number> {
  let waitMs = opts.retryMs ?? 250;
  const maxWaitMs = opts.maxRetryMs ?? 5_000;
  for (let round = 0; ; round++) {
    const answer = await askServerInfo(engine, opts.timeoutMs);
    if (answer.kind === 'info') return choosePort(answer.info, opts, log);
    if (answer.kind === 'absent') {
      const { port, from } = resolveSglangBootstrapPort(null, opts.configured, http(opts));
      log.warn(
        { bootstrap_port: port },
        `engine has no ${SGLANG_SERVER_INFO_PATHS.join(' or ')}; bootstrap port ${port} from ${FROM[from]}`,
      );
      return port;
    }
    // Log the first miss and then every tenth, not every retry.
    if (round % 10 === 0) {
      log.warn({ retry_ms: waitMs }, `waiting for the engine to report its bootstrap port: ${answer.why}`);
    }
    await delay(waitMs, opts.signal);
    waitMs = Math.min(maxWaitMs, waitMs * 2);
  }
}

const FROM = {
  engine: 'the engine',
  'rust-server': "the engine's HTTP port (SGLang Rust server)",
  config: '--bootstrap-port',
  default: "SGLang's default",
} as const;

function http(opts: LearnBootstrapPortOptions): { port: number | null; onHttpPort: boolean } {
  return { port: opts.httpPort ?? null, onHttpPort: opts.onHttpPort === true };
}

function choosePort(info: SglangServerInfo | null, opts: LearnBootstrapPortOptions, log: Logger): number {
  const { configured } = opts;
  const reported = info?.bootstrapPort ?? null;
  const { port, from } = resolveSglangBootstrapPort(info, configured, http(opts));
  if (from === 'rust-server' && configured !== null && configured !== port) {
    // SGLang itself refuses a Rust-server prefill whose bootstrap port is set and differs from --port.
    log.warn(
      { configured, bootstrap_port: port },
      `--bootstrap-port ${configured} ignored: SGLang's Rust server serves the bootstrap registry on its HTTP port ${port}`,
    );
  } else if (reported !== null && configured !== null && reported !== configured) {
    log.warn(
      { reported, configured },
      `--bootstrap-port ${configured} disagrees with the engine's disaggregation_bootstrap_port ${reported}; using the engine's`,
    );
  }
  // The Rust server's info names no mode (its /get_model_info does); nothing to warn about then.
  if (info !== null && !info.rustFrontend && info.disaggregationMode !== 'prefill') {
    log.warn(
      { disaggregation_mode: info.disaggregationMode },
      'the engine does not report disaggregation_mode prefill; bootstrap legs will fail',
    );
  }
  log.info({ bootstrap_port: port, from }, 'bootstrap port');
  return port;
}

async function askServerInfo(engine: EngineTransport, timeoutMs: number): Promise<InfoAnswer> {
  for (const path of SGLANG_SERVER_INFO_PATHS) {
    let status: number;
    let text: string;
    try {
      const res = await engine.request({
        method: 'GET',
        path,
        headers: {},
        timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      if (err instanceof EngineAuthError) throw err;
      return { kind: 'down', why: (err as Error).message };
    }
    if (status === 404) continue;
    if (status !== 200) return { kind: 'down', why: `GET ${path} answered ${status}` };
    try {
      return { kind: 'info', info: parseSglangServerInfo(JSON.parse(text)) };
    } catch {
      return { kind: 'info', info: null };
    }
  }
  return { kind: 'absent' };
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Error('stopped while waiting for the engine'));
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(new Error('stopped while waiting for the engine'));
      },
      { once: true },
    );
  });
}
