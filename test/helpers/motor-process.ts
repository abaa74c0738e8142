import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

export type MotorProcess = MotorChild;

/** Starts `motor <args>` as a real process and resolves once it logs `listening` (see spawnMotor). */
export function startMotor(args: string[], opts: { timeoutMs?: number } = {}): Promise<MotorProcess> {
  return spawnMotor(args, { timeoutMs: opts.timeoutMs });
}

export interface MotorUp {
  /** The OpenAI base URL from the banner (ends in /v1). */
  baseUrl: string;
  /** Every stdout line so far. */
  lines: string[];
  /** Ctrl-C; resolves with the exit code once motor up has stopped its processes and exited. */
  interrupt(): Promise<number | null>;
}

/** Starts `motor up <args>` as a user does and resolves once its banner names the base URL. */
export async function startMotorUp(args: string[]): Promise<MotorUp> {
  const bin = fileURLToPath(new URL('../../bin/motor.js', import.meta.url));
  const up = spawn(process.execPath, [bin, 'up', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  const baseUrl = await new Promise<string>((resolve, reject) => {
    up.once('exit', (code) => reject(new Error(`motor up exited early (${code}):\n${lines.join('\n')}`)));
    createInterface({ input: up.stdout }).on('line', (line) => {
      lines.push(line);
      const m = /OpenAI base URL: (\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
  });
  return {
    baseUrl,
    lines,
    interrupt: () => {
      up.kill('SIGINT');
      return exited;
    },
  };
}
