import { clusterCoordinatorConfig, clusterRoles } from '../cluster/local-cluster.js';
import { PEER_SECRET_ENV } from '../common/peer-secrets.js';
import { CliError, EXIT_BAD_INPUT, invalidConfig } from './cli-error.js';
import { assertPortFree } from './port-free.js';
import type { UpFlags } from './up.js';

/** Where a placeholder instance points while `motor up` validates its settings (nothing is called). */
const PLACEHOLDER_URL = 'http://127.0.0.1:1';

/**
 * `motor up --config file --set path=value`: the coordinator settings merged over the generated config,
 * validated as the coordinator will (same schema, same messages, the environment's overrides too)
 * and with its ports checked free — all before any process starts. Throws CliError.
 */
export async function coordinatorSettings(flags: UpFlags): Promise<Record<string, unknown>> {
  // Loaded here, not at the top, so other commands do not pay for the config schemas.
  const [config, { readStructuredMapping, StructuredFileError }, { mergeDeep }] = await Promise.all([
    import('../config/coordinator-config.js'),
    import('../common/structured-file.js'),
    import('../config/merge-deep.js'),
  ]);
  let settings: Record<string, unknown>;
  try {
    const fromFile =
      flags.config === undefined ? {} : await readStructuredMapping(flags.config, 'config file');
    const fromSet = config.configFromFlags({ set: flags.set });
    for (const [source, value] of [
      [`config file ${flags.config}`, fromFile],
      ['--set', fromSet],
    ] as const) {
      if ('instances' in value)
        throw new CliError(
          `${source}: instances are motor up's (--prefill, --decode, --union); ` +
            'a hand-built fleet runs with motor coordinator --config',
          EXIT_BAD_INPUT,
        );
    }
    settings = mergeDeep(fromFile, fromSet) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof StructuredFileError) throw new CliError(err.message, EXIT_BAD_INPUT);
    if (err instanceof config.ConfigError) throw invalidConfig(err.issues);
    throw err;
  }
  const placeholders = clusterRoles(flags).map((role) => ({ role, url: PLACEHOLDER_URL }));
  const generated = clusterCoordinatorConfig(
    { ...flags, direct: flags.direct ?? false, coordinator: settings },
    placeholders,
  );
  let resolved;
  try {
    // the cluster's peer secret is made when the children start (local-cluster.ts): a stand-in here
    const env = { ...process.env, [PEER_SECRET_ENV]: process.env[PEER_SECRET_ENV] ?? 'x'.repeat(32) };
    resolved = config.validateCoordinatorConfig(mergeDeep(generated, config.configFromEnv(env)), env);
  } catch (err) {
    if (err instanceof config.ConfigError) throw invalidConfig(err.issues);
    throw err;
  }
  await assertPortFree(resolved.server.host, resolved.server.port, 'coordinator --port / server.port');
  const management = resolved.management;
  if (management.port !== null && management.port !== undefined)
    await assertPortFree(management.host, management.port, 'coordinator management.port');
  return settings;
}
