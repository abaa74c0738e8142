import { CommanderError } from 'commander';
import { listenErrorText } from '../common/os-errors.js';

/**
 * The exit codes of every `motor` command, one convention (docs/cli.md "Exit codes" is generated from
 * this list), so a provisioning script can tell "fix the input" from "retry later" from "the answer is no".
 */
export const EXIT_CODES = [
  [0, 'done: a check found nothing wrong, or a server stopped on Ctrl-C / SIGTERM'],
  [
    1,
    'the command ran and the answer is no — `classify`: the config classifies as `unknown` (never paired); ' +
      '`doctor`, `verify`: drift; `bench`: a target answered nothing — or it failed while running (a child process died)',
  ],
  [
    2,
    'bad input, refused before anything starts: a usage error (unknown command or flag, a flag value out of ' +
      'range or not one of its choices), an unreadable or invalid file, an invalid config',
  ],
  [
    3,
    'something the command needs is unavailable: a port in use or not bindable, etcd unreachable, the ' +
      'coordinator unreachable or not answering with a report (`doctor`), no engine answering (`verify`)',
  ],
] as const;

export const EXIT_OK = 0;
/** The answer is no (classify `unknown`, doctor drift, bench with no answer), or a run-time failure. */
export const EXIT_FAILED = 1;
/** Bad input: a usage error, an unreadable or invalid file, an invalid config. */
export const EXIT_BAD_INPUT = 2;
/** Something needed is unavailable: a busy port, an unreachable etcd or coordinator. */
export const EXIT_UNAVAILABLE = 3;

/**
 * An expected failure (busy port, missing file, invalid config, unreachable etcd): main.ts prints it as
 * the one line `motor <command>: <message>`, without a stack, and exits with `exitCode`.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILED,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A coordinator config that fails validation (`ConfigError.issues`): every problem, on one line. */
export function invalidConfig(issues: readonly string[]): CliError {
  return new CliError(`invalid config: ${issues.join('; ')}`, EXIT_BAD_INPUT);
}

/** A port that cannot be listened on, as one line naming the setting that chose it; else undefined. */
export function listenError(err: unknown, setting?: string): CliError | undefined {
  const text = listenErrorText(err);
  if (text === undefined) return undefined;
  return new CliError(setting === undefined ? text : `${text} (${setting})`, EXIT_UNAVAILABLE);
}

/**
 * The exit code of a commander usage error: commander has printed it already (and exits 1 by
 * default); help and --version are not errors.
 */
export function usageExitCode(err: unknown): number | undefined {
  if (!(err instanceof CommanderError)) return undefined;
  return err.exitCode === 0 ? EXIT_OK : EXIT_BAD_INPUT;
}

/** The one-line form of an expected error, or `undefined` for a bug (which keeps its stack trace). */
export function expectedError(err: unknown): CliError | undefined {
  if (err instanceof CliError) return err;
  return listenError(err);
}

/** The first line of a message: YAML and gRPC errors carry code frames and notes after it. */
export function firstLine(text: string): string {
  return text.split('\n', 1)[0]!.trim();
}
