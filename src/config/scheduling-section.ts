import { z } from 'zod';
import {
  parseSchedulingConfig,
  SchedulingConfigError,
  schedulingConfigSchema,
  type PluginCatalog,
  type SchedulingConfig,
} from '../scheduling/index.js';

/**
 * The coordinator's `scheduling` section: the scheduling library's schema (src/scheduling/config.ts,
 * validated there with paths prefixed `scheduling.`) plus a `policy` shorthand and the engine-metrics
 * scraper settings, which the coordinator owns.
 */

/** `scheduling.policy` presets: each sets the prefill, decode and union profiles not given explicitly. */
export const SCHEDULING_POLICIES = [
  'round-robin',
  'random',
  'least-load',
  'power-of-two',
  'prefix-affinity',
  'session-affinity',
] as const;
export type SchedulingPolicy = (typeof SCHEDULING_POLICIES)[number];

type ProfileInput = {
  filters?: unknown[];
  scorers?: { type: string; weight?: number; params?: Record<string, unknown> }[];
  picker?: { type: string; params?: Record<string, unknown> };
};

const rr: ProfileInput = { scorers: [], picker: { type: 'round-robin' } };
const leastLoad: ProfileInput = { scorers: [{ type: 'least-load' }], picker: { type: 'max-score' } };

/** Profiles per policy: [prefill, decode, union]. */
export const POLICY_PROFILES: Record<SchedulingPolicy, [ProfileInput, ProfileInput, ProfileInput]> = {
  'round-robin': [rr, rr, rr],
  random: [
    { scorers: [], picker: { type: 'random' } },
    { scorers: [], picker: { type: 'random' } },
    { scorers: [], picker: { type: 'random' } },
  ],
  'least-load': [leastLoad, leastLoad, leastLoad],
  'power-of-two': [
    { scorers: [{ type: 'least-load' }], picker: { type: 'power-of-two' } },
    { scorers: [{ type: 'least-load' }], picker: { type: 'power-of-two' } },
    { scorers: [{ type: 'least-load' }], picker: { type: 'power-of-two' } },
  ],
  'prefix-affinity': [
    { scorers: [{ type: 'prefix-affinity' }], picker: { type: 'max-score' } },
    leastLoad,
    { scorers: [{ type: 'prefix-affinity' }], picker: { type: 'max-score' } },
  ],
  'session-affinity': [
    {
      scorers: [{ type: 'session-affinity', weight: 2 }, { type: 'least-load' }],
      picker: { type: 'max-score' },
    },
    {
      scorers: [{ type: 'session-affinity', weight: 2 }, { type: 'least-load' }],
      picker: { type: 'max-score' },
    },
    {
      scorers: [{ type: 'session-affinity', weight: 2 }, { type: 'least-load' }],
      picker: { type: 'max-score' },
    },
  ],
};

/** Plugin types that read scraped engine metrics (scraping turns on by itself when one is configured). */
export const METRICS_PLUGINS: readonly string[] = ['engine-metrics', 'kv-pressure'];

const scrapeSchema = z.strictObject({
  scrape: z
    .enum(['auto', 'on', 'off'])
    .default('auto')
    .describe(
      "scrape each engine's `/metrics` (through a proxy: `/v1/motor/engine-metrics`): `auto` = only when a " +
        'profile uses `engine-metrics` or `kv-pressure`',
    ),
  scrapeIntervalMs: z
    .int()
    .min(50)
    .default(1000)
    .describe('time between scrapes of one instance (one in flight per instance)'),
  scrapeTimeoutMs: z
    .int()
    .min(1)
    .default(1000)
    .describe('a slower scrape fails (the old snapshot goes stale)'),
});

const coordinatorKeysSchema = z.looseObject({
  policy: z
    .enum(SCHEDULING_POLICIES)
    .optional()
    .describe(
      'preset for the profiles not given explicitly: `least-load` (max-score over least-load), `power-of-two` ' +
        '(least-load, best of two random), `prefix-affinity` (prefix-affinity on prefill and union, least-load ' +
        'on decode), `session-affinity` (session-affinity ×2 + least-load); unset: the profile defaults below',
    ),
  engineMetrics: z.looseObject({}).optional(),
});

/**
 * The whole `scheduling` section as users write it, for the docs (`npm run docs:gen`): the library
 * schema plus the coordinator's keys. Validation runs the same pieces in resolveSchedulingSection.
 */
export const schedulingSectionSchema = z.strictObject({
  policy: coordinatorKeysSchema.shape.policy,
  ...schedulingConfigSchema.shape,
  engineMetrics: schedulingConfigSchema.shape.engineMetrics.unwrap().extend(scrapeSchema.shape).prefault({}),
});

/** Keys whose default, when unset, comes from an older key (see resolveSchedulingSection). */
export const SCHEDULING_LEGACY_DEFAULTS: Readonly<Record<string, string>> = {
  planPreference: 'dispatch.planPreference',
  'fallback.union': 'dispatch.fallbackToSingle',
  'fallback.degradedPrefill': 'dispatch.fallbackToSingle',
};

export interface EngineMetricsScrapeConfig {
  /** Resolved: scrape each instance's `/metrics` (on, or auto with a metrics plugin configured). */
  enabled: boolean;
  mode: 'auto' | 'on' | 'off';
  intervalMs: number;
  timeoutMs: number;
}

/** The resolved `scheduling` section. */
export interface CoordinatorSchedulingConfig {
  /** The shorthand as given (or mapped from the deprecated `scheduler.policy`). */
  policy: SchedulingPolicy | undefined;
  /** The library config: every default filled, every plugin's params validated. */
  library: SchedulingConfig;
  scrape: EngineMetricsScrapeConfig;
  /** The plugin types `library` was checked against (built-ins plus registered ones); default the built-ins. */
  plugins?: PluginCatalog;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function issuePath(path: readonly PropertyKey[]): string {
  let out = 'scheduling';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  return out;
}

/**
 * Validates `scheduling` and resolves it against the older keys: `scheduler.policy` (round-robin /
 * least-in-flight, deprecated) maps to the shorthand; `dispatch.fallbackToSingle` and
 * `dispatch.planPreference` supply `fallback` and `planPreference` unless those are set here.
 * Returns issues (`scheduling.prefill.scorers[0].weight: expected number`) instead of throwing.
 * Plugin types are looked up in `plugins` (default: the built-ins).
 */
export function resolveSchedulingSection(
  raw: unknown,
  legacy: {
    schedulerPolicy?: 'round-robin' | 'least-in-flight';
    fallbackToSingle: boolean;
    planPreference: readonly string[];
  },
  plugins?: PluginCatalog,
): { config: CoordinatorSchedulingConfig } | { issues: string[] } {
  const input = raw ?? {};
  if (!isRecord(input)) return { issues: ['scheduling: expected object'] };
  // every part is checked even when an earlier one fails, so all issues come out at once
  const issues: string[] = [];
  const lines = (error: z.ZodError, prefix: PropertyKey[] = []) =>
    error.issues.map(
      (i) => `${issuePath([...prefix, ...i.path])}: ${i.message.replace(/^Invalid (input|option): /, '')}`,
    );
  const keys = coordinatorKeysSchema.safeParse(input);
  if (!keys.success) issues.push(...lines(keys.error));
  const { policy: explicitPolicy, engineMetrics, ...rest } = input;
  const { scrape, scrapeIntervalMs, scrapeTimeoutMs, ...libraryMetrics } = (
    isRecord(engineMetrics) ? engineMetrics : {}
  ) as Record<string, unknown>;
  const scrapeParsed = scrapeSchema.safeParse({ scrape, scrapeIntervalMs, scrapeTimeoutMs });
  if (!scrapeParsed.success) issues.push(...lines(scrapeParsed.error, ['engineMetrics']));
  const policy =
    (keys.success ? (explicitPolicy as SchedulingPolicy | undefined) : undefined) ??
    (legacy.schedulerPolicy === 'round-robin'
      ? 'round-robin'
      : legacy.schedulerPolicy === 'least-in-flight'
        ? 'least-load'
        : undefined);
  const library: Record<string, unknown> = { ...rest, engineMetrics: libraryMetrics };
  if (policy) {
    const [prefill, decode, union] = POLICY_PROFILES[policy];
    library.prefill ??= prefill;
    library.decode ??= decode;
    library.union ??= union;
  }
  library.fallback ??= { union: legacy.fallbackToSingle, degradedPrefill: legacy.fallbackToSingle };
  library.planPreference ??= [...legacy.planPreference];
  let parsed: SchedulingConfig;
  try {
    parsed = parseSchedulingConfig(library, 'scheduling', plugins);
  } catch (err) {
    if (err instanceof SchedulingConfigError) return { issues: [...issues, ...err.issues] };
    throw err;
  }
  if (!scrapeParsed.success || issues.length > 0) return { issues };
  const usesMetrics = (['prefill', 'decode', 'union'] as const).some((role) => {
    const p = parsed[role];
    return [...p.filters, ...p.scorers].some((ref) => METRICS_PLUGINS.includes(ref.type));
  });
  const s = scrapeParsed.data;
  return {
    config: {
      policy,
      library: parsed,
      ...(plugins ? { plugins } : {}),
      scrape: {
        mode: s.scrape,
        enabled: s.scrape === 'on' || (s.scrape === 'auto' && usesMetrics),
        intervalMs: s.scrapeIntervalMs,
        timeoutMs: s.scrapeTimeoutMs,
      },
    },
  };
}
