import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { LISTENING_SERVER_KEY } from '../common/logger.js';

const MOTOR_BIN = fileURLToPath(new URL('../../bin/motor.js', import.meta.url));

export interface MotorChild {
  /** Base URL from the process's first unnamed `listening` log line. */
  url: string;
  /**
   * URLs of `listening` lines by the server they name (`LISTENING_SERVER_KEY`, e.g. `management`),
   * filled as they are logged; `SpawnMotorOptions.waitFor` makes the spawn wait for them.
   */
  urls: Record<string, string>;
  child: ChildProcess;
  /** Every JSON log line seen so far (bounded to the most recent `maxLogLines`). */
  logs: Record<string, unknown>[];
  /** SIGTERM, then SIGKILL after `killAfterMs`; resolves when the process has exited. */
  stop(killAfterMs?: number): Promise<void>;
}

/** `motor <args>` exited, or did not listen in time, before it was up. */
export class MotorChildError extends Error {
  constructor(
    message: string,
    /** One line: the child's own `motor <command>: …` error line, else what happened. */
    readonly reason: string,
  ) {
    super(message);
    this.name = 'MotorChildError';
  }
}

/** The child's one-line start-up error (cli-error.ts prints `motor <command>: …`), if it printed one. */
function stderrReason(stderr: string, fallback: string): string {
  const lines = stderr.split('\n').map((l) => l.trim());
  const own = lines.find((l) => l.startsWith('motor '));
  return own ?? fallback;
}

export interface SpawnMotorOptions {
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  maxLogLines?: number;
  /** Named `listening` lines (e.g. `["management"]`) to wait for besides the main one. */
  waitFor?: readonly string[];
  /** Called with each non-JSON or JSON stdout line, e.g. to forward logs. */
  onLine?: (line: string) => void;
  /**
   * Keep reading log lines once listening (default true). Benchmarks pass false: the process's stdout
   * is then drained unread, so parsing its access log does not load the measuring process.
   */
  followLogs?: boolean;
  /** The `bin/motor.js` to run (default: this checkout's); benchmarks compare another build with it. */
  bin?: string;
}

/**
 * Starts `motor <args>` as a separate process (the built CLI, exactly as a user runs it) and resolves
 * once it logs `{"msg":"listening","url":...}`. Rejects with the process's stderr if it exits first or
 * does not bind within the timeout — never hangs.
 */
export function spawnMotor(args: readonly string[], opts: SpawnMotorOptions = {}): Promise<MotorChild> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const maxLogLines = opts.maxLogLines ?? 10_000;
  const child = spawn(process.execPath, [opts.bin ?? MOTOR_BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: opts.env ?? process.env,
  });
  const logs: Record<string, unknown>[] = [];
  const urls: Record<string, string> = {};
  let mainUrl: string | undefined;
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    if (stderr.length < 64_000) stderr += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // 'close' comes after 'exit' once stdout is read to its end: its last lines (a shutdown log) are in `logs`
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = async (killAfterMs = 5_000): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      await exited;
      clearTimeout(timer);
    }
    await closed;
  };
  const label = `motor ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      const what = `did not listen within ${timeoutMs} ms`;
      reject(new MotorChildError(`${label} ${what}\n${stderr}`, stderrReason(stderr, what)));
    }, timeoutMs);
    const onEarlyExit = (code: number | null): void => {
      clearTimeout(timer);
      const what = `exited with ${code} before listening`;
      reject(new MotorChildError(`${label} ${what}\n${stderr}`, stderrReason(stderr, what)));
    };
    // 'close', not 'exit': the child's stderr is read to its end by then (it names why it failed)
    child.once('close', onEarlyExit);
    // the node binary could not be started at all (else an uncaught 'error' event)
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new MotorChildError(`${label}: ${err.message}`, err.message));
    });
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      opts.onLine?.(line);
      if (line[0] !== '{') return;
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (logs.length >= maxLogLines) logs.shift();
      logs.push(entry);
      if (entry.msg === 'listening' && typeof entry.url === 'string') {
        // a process's second server names itself (`management`); the main server's line names none
        const server = entry[LISTENING_SERVER_KEY];
        const named = typeof server === 'string' ? server : '';
        if (named) urls[named] = entry.url;
        if (!(opts.waitFor ?? []).includes(named)) mainUrl ??= entry.url;
        if (mainUrl === undefined || !(opts.waitFor ?? []).every((n) => n in urls)) return;
        clearTimeout(timer);
        child.off('close', onEarlyExit);
        if (opts.followLogs === false) {
          lines.close();
          child.stdout!.resume();
        }
        resolve({ url: mainUrl, urls, child, logs, stop });
      }
    });
  });
}
