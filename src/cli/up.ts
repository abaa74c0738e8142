import { InvalidArgumentError, Option, type Command } from 'commander';
import { onShutdown } from '../common/shutdown.js';
import { intArg, numArg } from './number-arg.js';
import { startLocalCluster, type LocalCluster, type LocalClusterOptions } from '../cluster/local-cluster.js';

/** The flags: the cluster options, with commander's optional `--direct` and repeatable `--sim-arg`. */
interface UpFlags extends Omit<LocalClusterOptions, 'direct' | 'simArgs' | 'onStarted'> {
  direct?: boolean;
  simArg: string[];
}

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
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .action(async (flags: UpFlags) => {
      if (flags.prefill + flags.decode + flags.union === 0)
        throw new InvalidArgumentError('no instances requested');
      process.stdout.write(`Starting ${describe(flags)}…\n`);
      const cluster = await startLocalCluster({
        ...flags,
        direct: flags.direct ?? false,
        simArgs: flags.simArg,
      });
      onShutdown(async () => {
        process.stdout.write('\nStopping the cluster…\n');
        await cluster.stop();
      });
      process.stdout.write(banner(cluster, flags.model));
    });
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
    'Press Ctrl-C to stop everything.',
    '',
  ].join('\n');
}
