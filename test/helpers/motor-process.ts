import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MOTOR_BIN = fileURLToPath(new URL('../../bin/motor.js', import.meta.url));

export interface MotorProcess {
  /** Base URL from the process's `listening` log line. */
  url: string;
  child: ChildProcess;
  /** Every JSON log line seen so far. */
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

/**
 * Starts `motor <args>` as a real process (built CLI, as a user runs it) and resolves once it logs
 * `listening`. Fails fast with the process's stderr if it exits first or does not bind in time.
 */
export function startMotor(
  args: string[],
  opts: { timeoutMs?: number; listenName?: string } = {},
): Promise<MotorProcess> {
  const child = spawn(process.execPath, [MOTOR_BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MOTOR_LOG_LEVEL: process.env.MOTOR_LOG_LEVEL ?? 'info' },
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`motor ${args.join(' ')} did not listen within ${opts.timeoutMs ?? 15_000} ms\n${stderr}`),
      );
    }, opts.timeoutMs ?? 15_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`motor ${args.join(' ')} exited with ${code} before listening\n${stderr}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (
        entry.msg === 'listening' &&
        typeof entry.url === 'string' &&
        (!opts.listenName || entry.name === opts.listenName)
      ) {
        clearTimeout(timer);
        resolve({ url: entry.url, child, logs, stop });
      }
    });
  });
}
