import type { Command } from 'commander';
import { CliError, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNAVAILABLE, invalidConfig } from './cli-error.js';
import { intArg } from './number-arg.js';

interface VerifyFlags {
  config: string;
  json?: boolean;
  probes: number;
  maxTokens: number;
  timeoutMs: number;
  metaserverHost: string;
}

export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description(
      "probe the engines of a config and check on the wire what Motor relies on: auth, metrics names, each P/D pair's " +
        'kv_transfer_params, EOS handover, decode cached tokens (silent recompute), metaserver call, bootstrap; ' +
        'exits 1 on drift, 3 when no engine answered',
    )
    .requiredOption(
      '--config <file>',
      "the coordinator's config file (YAML/JSON): its mode: direct instances are probed, with their keys",
    )
    .option('--json', 'print the report as JSON (attach it to a bug report)')
    .option('--probes <n>', 'probe requests through each pair (1–10)', intArg('--probes', 1, 10), 1)
    .option('--max-tokens <n>', 'output tokens of each probe decode (1–64)', intArg('--max-tokens', 1, 64), 4)
    .option('--timeout-ms <ms>', 'bound on each engine call (ms)', intArg('--timeout-ms', 1), 30_000)
    .option(
      '--metaserver-host <host>',
      'layer-wise pairs: the address the probe metaserver binds, which the decode engine must reach',
      '127.0.0.1',
    )
    .action(async (flags: VerifyFlags) => {
      process.exitCode = await verify(flags, program.version() ?? '0.0.0');
    });
}

async function verify(flags: VerifyFlags, motorVersion: string): Promise<number> {
  const [
    { ConfigError, loadCoordinatorConfig },
    { StructuredFileError },
    { verifyEngines },
    { verifyTable },
  ] = await Promise.all([
    import('../config/coordinator-config.js'),
    import('../common/structured-file.js'),
    import('../engine-verify/verify.js'),
    import('../engine-verify/verify-table.js'),
  ]);
  let config;
  try {
    config = await loadCoordinatorConfig({ config: flags.config });
  } catch (err) {
    if (err instanceof StructuredFileError) throw new CliError(err.message, EXIT_BAD_INPUT);
    if (err instanceof ConfigError) throw invalidConfig(err.issues);
    throw err;
  }
  const report = await verifyEngines(config, {
    probesPerPair: flags.probes,
    maxTokens: flags.maxTokens,
    timeoutMs: flags.timeoutMs,
    metaserverHost: flags.metaserverHost,
    motorVersion,
  });
  console.log(flags.json ? JSON.stringify(report, null, 2) : verifyTable(report));
  if (report.drift) return EXIT_FAILED;
  // Every engine's auth probe got no HTTP answer: nothing was checked.
  const auth = report.checks.filter((c) => c.check === 'auth' && c.verdict !== 'skipped');
  if (auth.length === 0 || auth.every((c) => c.verdict === 'unknown' && c.expected === 'an HTTP answer'))
    return EXIT_UNAVAILABLE;
  return 0;
}
