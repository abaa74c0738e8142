import { readdirSync } from 'node:fs';
import { join, posix } from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Import direction (docs/architecture.md, "Import direction"): which directories of src/ a directory
 * may not import. `only` lists what a directory may import besides itself; every other directory of
 * src/ is then refused. `allow` names test support under a denied directory that stays importable
 * (the in-process harness a neighbour's tests run on). A directory listed here that does not exist yet
 * costs nothing.
 */
const IMPORT_DIRECTION = [
  { from: 'src/protocol', only: ['src/common'], why: 'protocol imports nothing of ours but common' },
  { from: 'src/common', only: ['src/protocol'], why: 'common imports nothing of ours but protocol' },
  {
    from: 'src/simulator',
    only: ['src/protocol', 'src/common', 'src/kv-hash', 'src/model-tokenizer'],
    why: 'the simulator checks the protocol from the outside: it imports only protocol, common, kv-hash and model-tokenizer',
  },
  { from: 'src/kv-hash', only: [], why: "kv-hash is vLLM's block hash alone: it imports nothing of ours" },
  {
    from: 'src/model-tokenizer',
    only: ['src/kv-hash'],
    why: "model-tokenizer is the model's own tokenizer alone (what the engine runs): it imports only kv-hash",
  },
  {
    from: 'src/observability',
    deny: ['src/coordinator'],
    why: 'observability is a port the coordinator calls: it imports no coordinator code',
  },
  {
    from: 'src/registry',
    deny: ['src/scheduling', 'src/coordinator'],
    why: 'gateway → dispatch → scheduling → registry',
  },
  { from: 'src/scheduling', deny: ['src/coordinator'], why: 'gateway → dispatch → scheduling → registry' },
  {
    from: 'src/state',
    deny: ['src/coordinator', 'src/cli', 'src/workers'],
    why: 'state outlives requests: the coordinator uses it, never the other way',
  },
  {
    from: 'src/coordinator/dispatch',
    deny: ['src/coordinator/gateway', 'src/coordinator/apis'],
    why: 'gateway → apis → dispatch → scheduling → registry: the pipeline does not know which client API it serves',
  },
  {
    from: 'src/coordinator/apis',
    deny: ['src/coordinator/gateway'],
    why: 'the gateway runs the adapters: an adapter does not reach back into the gateway',
  },
  {
    from: 'src/coordinator/internal-request',
    only: ['src/common', 'src/protocol'],
    why: 'the internal request is what every coordinator folder reads: it imports only common and protocol',
  },
  {
    from: 'src/coordinator/kv-routing',
    deny: ['src/coordinator/dispatch', 'src/coordinator/gateway', 'src/coordinator/apis'],
    allow: ['src/coordinator/dispatch/testing'],
    why: 'dispatch → kv-routing: KV routing reads the internal request (internal-request/), not the pipeline',
  },
  {
    from: 'src/coordinator/scheduling-bridge',
    deny: ['src/coordinator/dispatch', 'src/coordinator/gateway', 'src/coordinator/apis'],
    allow: ['src/coordinator/dispatch/testing'],
    why: 'dispatch → scheduling-bridge: the bridge reads the internal request (internal-request/), not the pipeline',
  },
  {
    from: 'src/scheduling/plugins',
    deny: ['src/scheduling/plugins'],
    why: 'scheduling plugins do not import each other (shared code lives in src/scheduling/)',
  },
];

/** Files nested deeper than this below a listed directory are not checked. */
const MAX_DEPTH = 4;

const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The relative specifier that reaches `target` from a file `depth` directories below `dir`, as a
 * regular expression. ESLint's no-restricted-imports sees import strings as written, so the rule is
 * generated per depth: `../coordinator/x.js` is the coordinator from src/observability/a.ts, but not
 * from src/observability/sub/a.ts.
 */
function reachRegex(dir, depth, target, allow = []) {
  const rel = posix.relative(dir, target);
  if (rel === '') return `^\\./`; // a sibling in the same directory
  if (dir.startsWith(`${target}/`)) {
    // an enclosing directory (an `only` rule of a nested one): its other children, not what lies above
    const own = escapeRegex(posix.relative(target, dir).split('/')[0]);
    return `^${escapeRegex(`${'../'.repeat(depth)}${rel}/`)}(?!\\.\\./)(?!${own}/)`;
  }
  const kept = allow
    .filter((a) => a.startsWith(`${target}/`))
    .map((a) => `(?!/${escapeRegex(a.slice(target.length + 1))}(/|$))`)
    .join('');
  return `^${escapeRegex('../'.repeat(depth) + rel)}${kept}(/|$)`;
}

const srcDirs = readdirSync(join(import.meta.dirname, 'src'), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => `src/${e.name}`);

const deniedTargets = (rule) => rule.deny ?? srcDirs.filter((d) => d !== rule.from && !rule.only.includes(d));

/**
 * One config object per listed directory and depth, carrying the rules of that directory and of every
 * listed ancestor: flat config replaces (does not merge) a rule's options when two objects match a
 * file, so the most specific object — sorted last — must carry all of them.
 */
function importDirectionConfigs() {
  const dirs = [...new Set(IMPORT_DIRECTION.map((r) => r.from))].sort((a, b) => a.length - b.length);
  const configs = [];
  for (const dir of dirs) {
    const rules = IMPORT_DIRECTION.filter((r) => dir === r.from || dir.startsWith(`${r.from}/`));
    for (let depth = 0; depth <= MAX_DEPTH; depth++) {
      const restrictions = rules.flatMap((rule) =>
        deniedTargets(rule)
          .filter((target) => depth === 0 || target !== rule.from) // "each other": siblings only
          .map((target) => ({
            regex: reachRegex(dir, depth, target, rule.allow),
            message: `${rule.from} must not import ${target}: ${rule.why}.`,
          })),
      );
      configs.push({
        files: [`${dir}/${'*/'.repeat(depth)}*.ts`],
        rules: {
          'no-restricted-imports': ['error', { patterns: restrictions }],
          // import() too; esquery regexes cannot contain '/', hence \x2F.
          'no-restricted-syntax': [
            'error',
            ...restrictions.map(({ regex, message }) => ({
              selector: `ImportExpression[source.value=/${regex.replaceAll('/', '\\x2F')}/]`,
              message,
            })),
          ],
        },
      });
    }
  }
  return configs;
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  ...importDirectionConfigs(),
);
