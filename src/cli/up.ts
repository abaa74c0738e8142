import { Option, type Command } from 'commander';
import { onShutdown } from '../common/shutdown.js';
import { CliError, EXIT_BAD_INPUT } from './cli-error.js';
import { intArg, numArg } from './number-arg.js';
import { coordinatorSettings } from './up-settings.js';
import {
  ClusterStartError,
  startLocalCluster,
  type LocalCluster,
  type LocalClusterOptions,
} from '../cluster/local-cluster.js';

/** The flags: the cluster options, with commander's optional `--direct` and repeatable flags. */
export interface UpFlags extends Omit<
  LocalClusterOptions,
  'direct' | 'simArgs' | 'onStarted' | 'coordinator'
> {
  direct?: boolean;
  simArg: string[];
  /** Coordinator config file merged over the generated one. */
  config?: string;
  /** Coordinator `path=value` overrides. */
  set: string[];
}

const collect = (v: string, p: string[]): string[] => [...p, v];

export function registerUp(program: Command): void {
  program
    .command('up')
    .description('start a local P/D cluster on the simulator: engines, engine proxies and a coordinator')
    .option('--prefill <n>', 'prefill instances (0–64)', intArg('--prefill', 0, 64), 2)
    .option('--decode <n>', 'decode instances (0–64)', intArg('--decode', 0, 64), 2)
    .option('--union <n>', 'union (prefill+decode) instances (0–64)', intArg('--union', 0, 64), 0)
    .addOption(
      new Option(
        '--profile <profile>',
        'P/D flow: vLLM NIXL handoff, vLLM Mooncake layer-wise trigger, SGLang bootstrap',
      )
        .choices(['handoff', 'trigger', 'bootstrap'])
        .default('handoff'),
    )
    .option('--host <host>', 'coordinator listen address', '127.0.0.1')
    .option('--port <port>', 'coordinator port (0 = any free port)', intArg('--port', 0, 65535), 8000)
    .option('--model <name>', 'model name the simulators serve', 'motor-sim-7b')
    .option(
      '--time-scale <x>',
      'simulator speed: 1 = a 7B model on one GPU, 0 = no delays',
      numArg('--time-scale'),
      1,
    )
    .option('--direct', 'coordinator talks engine-native to the simulators (no engine proxies)')
    .option(
      '--sim-arg <arg>',
      'extra flag passed to every simulator, repeatable (e.g. --sim-arg=--itl-ms=5)',
      collect,
      [],
    )
    .option(
      '-c, --config <file>',
      'coordinator config (YAML or JSON) merged over the generated one; everything but instances',
    )
    .option(
      '--set <path=value>',
      'override a coordinator config key, value parsed as YAML, repeatable (e.g. --set retry.maxAttempts=5)',
      collect,
      [],
    )
    .action(async (flags: UpFlags) => {
      refuseImpossibleCounts(flags);
      // Settings are read, validated and the coordinator's port checked before any process starts.
      const coordinator = await coordinatorSettings(flags);
      process.stdout.write(`Starting ${describe(flags)}…\n`);
      let cluster;
      try {
        cluster = await startLocalCluster({
          ...flags,
          direct: flags.direct ?? false,
          simArgs: flags.simArg,
          coordinator,
        });
      } catch (err) {
        if (err instanceof ClusterStartError) throw new CliError(err.message);
        throw err;
      }
      onShutdown(async () => {
        process.stdout.write('\nStopping the cluster…\n');
        await cluster.stop();
      });
      process.stdout.write(banner(cluster, flags.model));
    });
}

/** Instance counts that cannot serve a request are refused before anything starts. */
function refuseImpossibleCounts(f: UpFlags): void {
  if (f.prefill + f.decode + f.union === 0)
    throw new CliError('no instances requested: give --prefill and --decode, or --union', EXIT_BAD_INPUT);
  if (f.prefill === 0 && f.union === 0)
    throw new CliError('--decode alone cannot serve a request: add --prefill or --union', EXIT_BAD_INPUT);
}

function describe(f: UpFlags): string {
  const parts = [`${f.prefill} prefill`, `${f.decode} decode`];
  if (f.union) parts.push(`${f.union} union`);
  return `${parts.join(' + ')} simulated instances (${f.profile}${f.direct ? ', direct' : ', through engine proxies'})`;
}

function banner(cluster: LocalCluster, model: string): string {
  const baseUrl = cluster.baseUrl;
  const instances = cluster.instances.map((inst, i) =>
    inst.url === inst.simUrl
      ? `  ${inst.role}-${i}  engine ${inst.simUrl}`
      : `  ${inst.role}-${i}  engine ${inst.simUrl}  proxy ${inst.url}`,
  );
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello!' }], stream: true });
  return [
    '',
    'Instances:',
    ...instances,
    '',
    `Motor is up. OpenAI base URL: ${baseUrl}/v1`,
    '',
    'Try it:',
    `  curl -N ${baseUrl}/v1/chat/completions -H 'content-type: application/json' \\`,
    `    -d '${body}'`,
    '',
    `Dashboard: ${baseUrl}/dashboard`,
    `Health: ${baseUrl}/health   Metrics: ${baseUrl}/metrics`,
    ...(cluster.managementUrl !== null
      ? [`Doctor: motor doctor --coordinator ${cluster.managementUrl}   (management API, loopback only)`]
      : []),
    'Press Ctrl-C to stop everything.',
    '',
  ].join('\n');
}
