import { z } from 'zod';
import { DispatchPlan } from '../protocol/index.js';
import { findPlugin, pluginTypes } from './plugin-registry.js';
import type { PluginKind } from './plugin.js';

const plans = Object.values(DispatchPlan) as [DispatchPlan, ...DispatchPlan[]];

const paramsSchema = z.record(z.string(), z.unknown()).default({});
const filterRef = z.strictObject({ type: z.string().min(1), params: paramsSchema });
const scorerRef = z.strictObject({
  type: z.string().min(1),
  weight: z.number().nonnegative().default(1),
  params: paramsSchema,
});
const pickerRef = z.strictObject({ type: z.string().min(1), params: paramsSchema });

function profileSchema(defaultScorers: { type: string; weight?: number }[]) {
  return z
    .strictObject({
      filters: z.array(filterRef).default([]),
      scorers: z.array(scorerRef).prefault(defaultScorers),
      picker: pickerRef.prefault({ type: 'max-score' }),
    })
    .prefault({});
}

/** The scheduling section of the coordinator config: the source of truth for shape and defaults. */
export const schedulingConfigSchema = z.strictObject({
  /** Defaults: prefix affinity (which includes queued load) on prefill and union, least-load on decode. */
  prefill: profileSchema([{ type: 'prefix-affinity' }]),
  decode: profileSchema([{ type: 'least-load' }]),
  union: profileSchema([{ type: 'prefix-affinity' }]),
  /** When a pair shares several plans, the first listed wins. */
  planPreference: z.array(z.enum(plans)).default([...plans]),
  fallback: z
    .strictObject({
      /** P/D impossible (incompatible or unavailable) → single-instance dispatch on a union instance. */
      union: z.boolean().default(true),
      /** No decode instance available → single-instance dispatch on a prefill instance. */
      degradedPrefill: z.boolean().default(true),
    })
    .prefault({}),
  disaggregation: z
    .strictObject({
      /** `conditional`: prompts of at most `shortPromptTokens` go to a union instance when one is available. */
      mode: z.enum(['always', 'conditional']).default('always'),
      shortPromptTokens: z.number().int().nonnegative().default(256),
    })
    .prefault({}),
  engineMetrics: z.strictObject({ staleAfterMs: z.number().int().positive().default(5000) }).prefault({}),
  circuitBreaker: z
    .strictObject({
      enabled: z.boolean().default(true),
      failureThreshold: z.number().int().positive().default(5),
      openMs: z.number().int().positive().default(10_000),
      halfOpenMaxProbes: z.number().int().positive().default(1),
    })
    .prefault({}),
  admission: z
    .strictObject({
      maxConcurrent: z.number().int().positive().default(1024),
      maxQueue: z.number().int().nonnegative().default(1024),
      queueTimeoutMs: z.number().int().positive().default(30_000),
      retryAfterSeconds: z.number().int().positive().default(1),
      rateLimit: z
        .strictObject({
          ratePerSecond: z.number().positive(),
          burst: z.number().positive().optional(),
          maxKeys: z.number().int().positive().optional(),
        })
        .optional(),
    })
    .prefault({}),
  /** Seed for the scheduler's random source (deterministic tests and simulations). */
  seed: z.number().int().optional(),
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

/**
 * Validates and fills defaults, including every plugin's params (checked against the plugin's own
 * schema). Throws {@link SchedulingConfigError} naming each bad path, e.g.
 * `prefill.scorers[1].weight: expected number`. `pathPrefix` (e.g. `scheduling`) is prepended to paths.
 */
export function parseSchedulingConfig(input: unknown = {}, pathPrefix = ''): SchedulingConfig {
  const parsed = schedulingConfigSchema.safeParse(input ?? {});
  if (!parsed.success) throw new SchedulingConfigError(formatIssues(pathPrefix, parsed.error));
  const config = parsed.data;
  const issues: string[] = [];
  const check = (
    ref: { type: string; params: Record<string, unknown> },
    kind: PluginKind,
    path: PropertyKey[],
  ) => {
    const definition = findPlugin(ref.type);
    if (!definition || definition.kind !== kind) {
      issues.push(
        `${formatPath(pathPrefix, [...path, 'type'])}: unknown ${kind} '${ref.type}' (known: ${pluginTypes(kind).join(', ')})`,
      );
      return;
    }
    const params = definition.params.safeParse(ref.params);
    if (!params.success)
      issues.push(...formatIssues(formatPath(pathPrefix, [...path, 'params']), params.error));
    else ref.params = params.data as Record<string, unknown>;
  };
  for (const role of ROLES) {
    const profile = config[role];
    profile.filters.forEach((ref, i) => check(ref, 'filter', [role, 'filters', i]));
    profile.scorers.forEach((ref, i) => check(ref, 'scorer', [role, 'scorers', i]));
    check(profile.picker, 'picker', [role, 'picker']);
  }
  if (issues.length > 0) throw new SchedulingConfigError(issues);
  return config;
}
