import type { Command } from 'commander';
import { CliError, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNAVAILABLE } from './cli-error.js';
import { intArg } from './number-arg.js';
import type { DoctorReport } from '../coordinator/doctor/doctor.js';
import { DOCTOR_PATH } from '../coordinator/doctor/doctor-route.js';
import { doctorTable } from '../coordinator/doctor/doctor-table.js';

interface DoctorOptions {
  coordinator: string;
  adminToken?: string;
  json?: boolean;
  timeoutMs: number;
}

/** Exit code when some check found drift (0: none; unknown verdicts do not count). */
export const EXIT_DRIFT = EXIT_FAILED;
/** Exit code when the coordinator could not be asked (unreachable, refused, not a doctor report). */
export const EXIT_NO_REPORT = EXIT_UNAVAILABLE;

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description(
      "check each instance against Motor's precise-routing settings: tokenizer, chat template, block size, " +
        'block hashes, KV event stream, predicted vs reported cached tokens; exits 1 on drift, 3 without a report',
    )
    .requiredOption(
      '--coordinator <url>',
      "the coordinator's management API URL (management.port), e.g. http://127.0.0.1:9090",
    )
    .option('--admin-token <token>', "the management API's admin token (env MOTOR_ADMIN_TOKEN)")
    .option('--json', 'print the report as JSON')
    .option('--timeout-ms <ms>', 'bound on the whole check (ms)', intArg('--timeout-ms', 1), 60_000)
    .action(async (opts: DoctorOptions) => {
      process.exitCode = await doctor(opts);
    });
}

async function doctor(opts: DoctorOptions): Promise<number> {
  let url: URL;
  try {
    url = new URL(DOCTOR_PATH, opts.coordinator.replace(/\/*$/, '/'));
  } catch {
    throw new CliError(`--coordinator: not a URL: '${opts.coordinator}'`, EXIT_BAD_INPUT);
  }
  const token = opts.adminToken ?? process.env.MOTOR_ADMIN_TOKEN;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
  } catch (err) {
    const cause = (err as { cause?: { message?: string } }).cause?.message ?? (err as Error).message;
    throw new CliError(`${url.href}: ${cause}`, EXIT_NO_REPORT);
  }
  const text = await res.text();
  if (res.status !== 200)
    throw new CliError(`${url.href} answered ${res.status}: ${text.slice(0, 300)}`, EXIT_NO_REPORT);
  let report: DoctorReport;
  try {
    report = JSON.parse(text) as DoctorReport;
  } catch {
    throw new CliError(
      `${url.href} answered something other than a doctor report (is it the management port?)`,
      EXIT_NO_REPORT,
    );
  }
  console.log(opts.json ? JSON.stringify(report, null, 2) : doctorTable(report));
  return report.drift ? EXIT_DRIFT : 0;
}
