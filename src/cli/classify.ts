import type { Command } from 'commander';
import { EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK } from './cli-error.js';
import { StructuredFileError } from '../common/structured-file.js';
// Direct module imports, not the protocol index: the CLI start-up need not load the zod schemas.
import { dispatchCapabilitiesForProfile, DispatchProfileError } from '../protocol/classification.js';
import { ENGINE_KINDS, explainEngineProfile, type EngineKind } from '../protocol/engine-profile.js';
import { readEngineConfig, type EngineConfigInput } from '../protocol/engine-config-input.js';

interface ClassifyOptions {
  engine?: EngineKind;
  profile?: string;
  json?: boolean;
  seed?: boolean;
}

export function registerClassify(program: Command): void {
  program
    .command('classify')
    .description('print the dispatch profile and capabilities of an engine config, and which key decided')
    .argument(
      '<engine-config...>',
      'a JSON or YAML file (vLLM engine config, the bare --kv-transfer-config JSON, a vLLM or SGLang ' +
        '--config file, or endpoint config), inline JSON, or launch arguments: one quoted string ' +
        "('--kv-transfer-config {...}') or words after -- (-- --disaggregation-mode prefill ...)",
    )
    .option(
      '--engine <kind>',
      `engine kind: ${ENGINE_KINDS.join('|')} (default: engine_type in the file, else vllm)`,
    )
    .option(
      '--profile <profile>',
      'explicit dispatch_profile override (trigger, handoff, bootstrap, or a plan name)',
    )
    .option('--json', 'print the result as JSON')
    // launch arguments are the engine's flags: they reach the argument as words, not as Motor's options
    .allowUnknownOption()
    .option(
      '--seed',
      "the seed protocol's strict answer: only the connector names it knows (newer vLLM names: unknown)",
    )
    .action(async (input: string[], opts: ClassifyOptions) => {
      process.exitCode = await classify(input, opts);
    });
}

async function classify(input: string[], opts: ClassifyOptions): Promise<number> {
  if (opts.engine !== undefined && !(ENGINE_KINDS as readonly string[]).includes(opts.engine)) {
    console.error(`motor classify: --engine must be one of ${ENGINE_KINDS.join(', ')}, got '${opts.engine}'`);
    return EXIT_BAD_INPUT;
  }
  let read: EngineConfigInput;
  try {
    read = await readEngineConfig(input, 'engine config');
  } catch (err) {
    if (!(err instanceof StructuredFileError)) throw err;
    console.error(`motor classify: ${err.message}`);
    return EXIT_BAD_INPUT;
  }
  let explanation;
  try {
    explanation = explainEngineProfile(read.config, opts.engine, opts.profile, {
      strict: opts.seed === true,
    });
  } catch (err) {
    if (!(err instanceof DispatchProfileError)) throw err;
    console.error(`motor classify: ${err.message}`);
    return EXIT_BAD_INPUT;
  }
  const capabilities = dispatchCapabilitiesForProfile(explanation.profile);
  // `unknown` is never paired: a provisioning script sees it in the exit code
  const exitCode = capabilities.length > 0 || explanation.engine === 'sglang' ? EXIT_OK : EXIT_FAILED;
  if (opts.json) {
    console.log(JSON.stringify({ ...explanation, input: read.form, dispatch_capabilities: capabilities }));
    return exitCode;
  }
  console.log(`input:        ${read.form}`);
  console.log(`engine:       ${explanation.engine}`);
  console.log(`profile:      ${explanation.profile}`);
  console.log(
    `capabilities: ${capabilities.length ? capabilities.join(', ') : '(none: fail closed, not routable for P/D)'}`,
  );
  console.log(`decided by:   ${explanation.decidedBy} (${explanation.reason})`);
  for (const note of explanation.skipped) console.log(`skipped:      ${note}`);
  return exitCode;
}
