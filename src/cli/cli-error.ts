import { listenErrorText } from '../common/os-errors.js';

/** Exit code for bad input: a usage error, an unreadable or invalid file. */
export const EXIT_BAD_INPUT = 2;

/**
 * An expected start-up failure (busy port, missing file, invalid config, unreachable etcd): main.ts
 * prints it as the one line `motor <command>: <message>`, without a stack, and exits with `exitCode`.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A coordinator config that fails validation (`ConfigError.issues`): every problem, on one line. */
export function invalidConfig(issues: readonly string[]): CliError {
  return new CliError(`invalid config: ${issues.join('; ')}`, EXIT_BAD_INPUT);
}

/** The one-line form of an expected error, or `undefined` for a bug (which keeps its stack trace). */
export function expectedError(err: unknown): CliError | undefined {
  if (err instanceof CliError) return err;
  const listen = listenErrorText(err);
  return listen === undefined ? undefined : new CliError(listen);
}

/** The first line of a message: YAML and gRPC errors carry code frames and notes after it. */
export function firstLine(text: string): string {
  return text.split('\n', 1)[0]!.trim();
}
