import { z } from 'zod';
import { DispatchPlan } from '../protocol/index.js';
import { builtinPlugins, type PluginCatalog } from './plugin-registry.js';
import type { PluginKind } from './plugin.js';

const plans = Object.values(DispatchPlan) as [DispatchPlan, ...DispatchPlan[]];

const paramsSchema = z.record(z.string(), z.unknown()).default({}).describe("the plugin's params");
const pluginType = z.string().min(1).describe('plugin type (see the plugin list)');
const filterRef = z.strictObject({ type: pluginType, params: paramsSchema });
const scorerRef = z.strictObject({
  type: pluginType,
  weight: z.number().nonnegative().default(1).describe("multiplies the scorer's score in [0, 1]"),
  params: paramsSchema,
});
const pickerRef = z.strictObject({ type: pluginType, params: paramsSchema });

function profileSchema(defaultScorers: { type: string; weight?: number }[]) {
  return z
    .strictObject({
      filters: z
        .array(filterRef)
        .default([])
        .describe(
          'drop candidates; the `circuit-breaker` filter runs first by itself while the breaker is on',
        ),
      scorers: z
        .array(scorerRef)
        .prefault(defaultScorers)
        .describe('each scores every candidate in [0, 1]; the weighted scores are summed'),
      picker: pickerRef
        .prefault({ type: 'max-score' })
        .describe('chooses among the filtered candidates given the score sums'),
    })
    .prefault({})
    .describe('how instances of this role are picked: filters → weighted scorers → picker');
}

/** The scheduling section of the coordinator config: the source of truth for shape, defaults and docs. */
export const schedulingConfigSchema = z.strictObject({
  // Defaults: prefix affinity (which includes queued load) on prefill and union, least-load on decode.
  prefill: profileSchema([{ type: 'prefix-affinity' }]),
  decode: profileSchema([{ type: 'least-load' }]),
  union: profileSchema([{ type: 'prefix-affinity' }]),
  planPreference: z
    .array(z.enum(plans))
    .default([...plans])
    .describe('which plan wins when a pair shares several: the first listed'),
  fallback: z
    .strictObject({
      union: z
        .boolean()
        .default(true)
        .describe(
          'P/D impossible (incompatible or unavailable) → single-instance dispatch on a union instance ' +
            '(a union-only fleet always uses them)',
        ),
      degradedPrefill: z
        .boolean()
        .default(true)
        .describe('no decode instance available → single-instance dispatch on a prefill instance'),
    })
    .prefault({}),
  disaggregation: z
    .strictObject({
      mode: z
        .enum(['always', 'conditional'])
        .default('always')
        .describe(
          '`conditional`: prompts of at most `shortPromptTokens` go to a union instance when one is available',
        ),
      shortPromptTokens: z
        .number()
        .int()
        .nonnegative()
        .default(256)
        .describe('threshold of `conditional` (estimated prompt tokens)'),
    })
    .prefault({}),
  engineMetrics: z
    .strictObject({
      staleAfterMs: z
        .number()
        .int()
        .positive()
        .default(5000)
        .describe(
          'a scraped snapshot older than this is ignored (counted as a fallback, logged once per instance)',
        ),
    })
    .prefault({}),
  circuitBreaker: z
    .strictObject({
      enabled: z.boolean().default(true).describe('per-instance circuit breaker'),
      failureThreshold: z
        .number()
        .int()
        .positive()
        .default(5)
        .describe('consecutive failed legs that open the circuit'),
      openMs: z.number().int().positive().default(10_000).describe('open → half-open after this long (ms)'),
      halfOpenMaxProbes: z
        .number()
        .int()
        .positive()
        .default(1)
        .describe('requests let through at once while half-open; a success closes, a failure re-opens'),
    })
    .prefault({}),
  admission: z
    .strictObject({
      maxConcurrent: z
        .number()
        .int()
        .positive()
        .default(1024)
        .describe('client requests running at once through this coordinator'),
      maxQueue: z
        .number()
        .int()
        .nonnegative()
        .default(1024)
        .describe('requests waiting for a slot (FIFO); beyond → 503 at once'),
      queueTimeoutMs: z
        .number()
        .int()
        .positive()
        .default(30_000)
        .describe('a queued request is answered 503 after waiting this long (ms)'),
      retryAfterSeconds: z.number().int().positive().default(1).describe('`Retry-After` of the 503s'),
      rateLimit: z
        .strictObject({
          ratePerSecond: z.number().positive().describe('tokens added to each bucket per second'),
          burst: z.number().positive().optional().describe('bucket size (default `max(1, ratePerSecond)`)'),
          maxKeys: z
            .number()
            .int()
            .positive()
            .optional()
            .describe('keys remembered, least recently used dropped (default 10000)'),
        })
        .optional()
        .describe(
          'per-API-key token bucket (key: the `Authorization: Bearer` token; callers without one share a ' +
            'bucket); over → 429 with `Retry-After` = time to the next token; unset = off',
        ),
    })
    .prefault({}),
  seed: z
    .number()
    .int()
    .optional()
    .describe(
      "seed of the scheduler's random source (tie breaks, `random`, `power-of-two`); unset = `Math.random`",
    ),
});

export type SchedulingConfigInput = z.input<typeof schedulingConfigSchema>;
export type SchedulingConfig = z.output<typeof schedulingConfigSchema>;
export type ProfileConfig = SchedulingConfig['prefill'];

/** Invalid scheduling config; `issues` are `path: message` lines. */
export class SchedulingConfigError extends Error {
  constructor(readonly issues: readonly string[]) {
    super(`invalid scheduling config:\n  ${issues.join('\n  ')}`);
    this.name = 'SchedulingConfigError';
  }
}

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '(root)' : out;
}

function formatIssues(prefix: string, error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const message =
      issue.code === 'invalid_type'
        ? `expected ${issue.expected}`
        : issue.message.replace(/^Invalid input: /, '');
    return `${formatPath(prefix, issue.path)}: ${message}`;
  });
}

const ROLES = ['prefill', 'decode', 'union'] as const;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Validates and fills defaults, including every plugin's params (checked against the plugin's own
 * schema). Throws {@link SchedulingConfigError} naming each bad path, e.g.
 * `prefill.scorers[1].weight: expected number`. `pathPrefix` (e.g. `scheduling`) is prepended to paths;
 * plugin types are looked up in `plugins` (default: the built-ins).
 */
export function parseSchedulingConfig(
  input: unknown = {},
  pathPrefix = '',
  plugins: PluginCatalog = builtinPlugins,
): SchedulingConfig {
  const parsed = schedulingConfigSchema.safeParse(input ?? {});
  const issues: string[] = parsed.success ? [] : formatIssues(pathPrefix, parsed.error);
  // the plugin types are checked even when the schema fails elsewhere (every issue at once); on the
  // raw input then, where a ref whose shape is wrong was reported above and is skipped here
  const check = (ref: unknown, kind: PluginKind, path: PropertyKey[]) => {
    if (!isRecord(ref) || typeof ref.type !== 'string') return;
    const definition = plugins.find(ref.type);
    if (!definition || definition.kind !== kind) {
      issues.push(
        `${formatPath(pathPrefix, [...path, 'type'])}: unknown ${kind} '${ref.type}' (known: ${plugins.types(kind).join(', ')})`,
      );
      return;
    }
    if (ref.params !== undefined && !isRecord(ref.params)) return;
    const params = definition.params.safeParse(ref.params ?? {});
    if (!params.success)
      issues.push(...formatIssues(formatPath(pathPrefix, [...path, 'params']), params.error));
    else if (parsed.success) ref.params = params.data as Record<string, unknown>;
  };
  const config: unknown = parsed.success ? parsed.data : input;
  for (const role of ROLES) {
    const profile = isRecord(config) ? config[role] : undefined;
    if (!isRecord(profile)) continue;
    const list = (key: 'filters' | 'scorers') => (Array.isArray(profile[key]) ? profile[key] : []);
    list('filters').forEach((ref, i) => check(ref, 'filter', [role, 'filters', i]));
    list('scorers').forEach((ref, i) => check(ref, 'scorer', [role, 'scorers', i]));
    check(profile.picker, 'picker', [role, 'picker']);
  }
  if (issues.length > 0 || !parsed.success) throw new SchedulingConfigError(issues);
  return parsed.data;
}
