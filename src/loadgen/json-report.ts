import { cpus, freemem, loadavg, totalmem } from 'node:os';
import type { TargetResult } from './runner.js';

export interface BenchReport {
  report: 'motor-bench';
  version: 1;
  /** The command line as typed (argv re-quoted). */
  command: string;
  argv: string[];
  startedAt: string;
  finishedAt: string;
  settings: Record<string, unknown>;
  environment: Record<string, unknown>;
  targets: TargetResult[];
}

/** Shell-quotes one argument when needed, so `command` can be pasted back. */
export function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

export function commandLine(argv: readonly string[]): string {
  return ['motor', ...argv].map(shellQuote).join(' ');
}

/** Facts about the machine the numbers came from. */
export function environmentFacts(motorVersion: string): Record<string, unknown> {
  const cpu = cpus();
  return {
    motorVersion,
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    cpuCount: cpu.length,
    cpuModel: cpu[0]?.model ?? 'unknown',
    totalMemoryMiB: Math.round(totalmem() / 1048576),
    freeMemoryMiB: Math.round(freemem() / 1048576),
    loadAverage: loadavg().map((v) => Number(v.toFixed(2))),
  };
}
