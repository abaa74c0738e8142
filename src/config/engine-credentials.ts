import { z } from 'zod';

/** The keys Motor presents to one engine in direct mode. Never logged nor shown. */
export interface EngineCredentials {
  apiKey: string | null;
  /** SGLang `--admin-api-key`, for `/abort_request`; null = the api key. */
  adminApiKey: string | null;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Per-instance engine credentials (spread into the instance schema). A key may be written in the
 * file or, better, named by an environment variable so the secret stays out of the YAML.
 */
export const engineCredentialFields = {
  apiKey: z
    .string()
    .min(1)
    .optional()
    .describe(
      "direct mode: the engine's `--api-key`, sent as `Authorization: Bearer` on legs, metric scrapes and " +
        'abort calls (never logged nor shown); prefer `apiKeyEnv`',
    ),
  apiKeyEnv: z
    .string()
    .regex(ENV_NAME, 'must be an environment variable name')
    .optional()
    .describe('direct mode: name of the environment variable holding `apiKey` (unset = start-up error)'),
  adminApiKey: z
    .string()
    .min(1)
    .optional()
    .describe(
      "direct SGLang: the engine's `--admin-api-key`, sent on `/abort_request` (default: `apiKey`); prefer `adminApiKeyEnv`",
    ),
  adminApiKeyEnv: z
    .string()
    .regex(ENV_NAME, 'must be an environment variable name')
    .optional()
    .describe(
      'direct SGLang: name of the environment variable holding `adminApiKey` (unset = start-up error)',
    ),
};

/** The config keys that hold or name a secret. */
export type EngineKeyField = keyof typeof engineCredentialFields;
type CredentialFields = { [K in EngineKeyField]?: string | undefined };

/**
 * Moves one instance's credentials into `engineCredentials` (under `id`) and returns the instance
 * without them, so resolved instances (registry, management API, dashboard) never carry a key.
 */
export function takeEngineCredentials<T extends CredentialFields & { mode: 'proxy' | 'direct' }>(
  instance: T,
  id: string,
  path: string,
  into: { env: NodeJS.ProcessEnv; engineCredentials: Map<string, EngineCredentials>; issues: string[] },
): Omit<T, EngineKeyField> {
  const { apiKey, apiKeyEnv, adminApiKey, adminApiKeyEnv, ...rest } = instance;
  const resolved = resolveEngineCredentials(
    { apiKey, apiKeyEnv, adminApiKey, adminApiKeyEnv, mode: instance.mode },
    path,
    into.env,
  );
  into.issues.push(...resolved.issues);
  if (resolved.credentials) into.engineCredentials.set(id, resolved.credentials);
  return rest;
}

/**
 * One instance's credentials from its config and the environment, or the problems (one line each,
 * prefixed with the instance's config path). Null when it has none.
 */
export function resolveEngineCredentials(
  instance: CredentialFields & { mode: 'proxy' | 'direct' },
  path: string,
  env: NodeJS.ProcessEnv,
): { credentials: EngineCredentials | null; issues: string[] } {
  const issues: string[] = [];
  const pick = (key: 'apiKey' | 'adminApiKey'): string | null => {
    const literal = instance[key];
    const envName = instance[`${key}Env`];
    if (literal !== undefined && envName !== undefined) {
      issues.push(`${path}.${key}: set ${key} or ${key}Env, not both`);
      return null;
    }
    if (envName === undefined) return literal ?? null;
    const value = env[envName];
    if (value === undefined || value === '') {
      issues.push(`${path}.${key}Env: environment variable ${envName} is not set`);
      return null;
    }
    return value;
  };
  const apiKey = pick('apiKey');
  const adminApiKey = pick('adminApiKey');
  if ((apiKey !== null || adminApiKey !== null) && instance.mode === 'proxy') {
    issues.push(
      `${path}: engine keys belong to direct mode; a proxy instance's engine proxy takes --engine-api-key`,
    );
  }
  if (issues.length > 0 || (apiKey === null && adminApiKey === null)) return { credentials: null, issues };
  return { credentials: { apiKey, adminApiKey }, issues };
}
