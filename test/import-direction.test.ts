import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The import-direction rules of eslint.config.js fire: each row lints one import written in a file at
 * `file` (which need not exist) with the repository's own config. If a config change silently drops a
 * rule, a `refused` row fails here.
 */
const ROWS: [file: string, source: string, refused: boolean][] = [
  ['src/protocol/x.ts', "import '../common/http.js';", false],
  ['src/protocol/x.ts', "import '../registry/index.js';", true],
  ['src/common/x.ts', "import '../protocol/index.js';", false],
  ['src/common/x.ts', "import '../config/coordinator-config.js';", true],
  ['src/simulator/x.ts', "import './flow.js';", false],
  ['src/simulator/x.ts', "import '../protocol/index.js';", false],
  ['src/simulator/x.ts', "import '../cluster/motor-child.js';", true],
  ['src/simulator/x.ts', "import '../engine-adapters/index.js';", true],
  ['src/simulator/x.ts', "import '../kv-hash/index.js';", false],
  ['src/simulator/x.ts', "import '../model-tokenizer/index.js';", false],
  ['src/model-tokenizer/x.ts', "import '../kv-hash/index.js';", false],
  ['src/model-tokenizer/x.ts', "import '../coordinator/coordinator.js';", true],
  ['src/kv-hash/x.ts', "import '../common/http.js';", true],
  ['src/kv-hash/x.ts', "import './cbor.js';", false],
  ['src/simulator/sub/x.ts', "import '../flow.js';", false],
  ['src/simulator/sub/x.ts', "import '../../cluster/motor-child.js';", true],
  ['src/observability/x.ts', "import '../protocol/index.js';", false],
  ['src/observability/x.ts', "import type { Route } from '../coordinator/route-selection.js';", true],
  ['src/observability/x.ts', "export { ERROR_CODES } from '../coordinator/route.js';", true],
  ['src/observability/x.ts', "await import('../coordinator/route.js');", true],
  ['src/registry/x.ts', "import '../common/http.js';", false],
  ['src/registry/x.ts', "import '../scheduling/index.js';", true],
  ['src/registry/x.ts', "import '../coordinator/coordinator.js';", true],
  ['src/scheduling/x.ts', "import '../registry/index.js';", false],
  ['src/scheduling/x.ts', "import '../coordinator/coordinator.js';", true],
  ['src/scheduling/plugins/a.ts', "import '../plugin.js';", false],
  ['src/scheduling/plugins/a.ts', "import './least-load-scorer.js';", true],
  ['src/scheduling/plugins/a.ts', "import '../../coordinator/coordinator.js';", true],
  ['src/coordinator/gateway/x.ts', "import '../dispatch/attempt.js';", false],
  ['src/coordinator/dispatch/x.ts', "import '../../scheduling/index.js';", false],
  ['src/coordinator/dispatch/x.ts', "import '../gateway/routes.js';", true],
  ['src/coordinator/dispatch/x.ts', "import '../gateway/index.js';", true],
  ['src/coordinator/dispatch/relay/x.ts', "import '../../gateway/gateway.js';", true],
  ['src/coordinator/dispatch/relay/x.ts', "import '../attempt/attempt.js';", false],
  ['src/coordinator/gateway/x.ts', "import '../dispatch/pipeline.js';", false],
  ['src/coordinator/gateway/x.ts', "import '../apis/api-adapters.js';", false],
  ['src/coordinator/dispatch/x.ts', "import '../apis/api-adapter.js';", true],
  ['src/coordinator/dispatch/request/x.ts', "import '../../apis/translating-sink.js';", true],
  ['src/coordinator/apis/x.ts', "import '../dispatch/pipeline.js';", false],
  ['src/coordinator/apis/x.ts', "import '../gateway/api-route.js';", true],
  ['src/coordinator/apis/openai/x.ts', "import '../../gateway/gateway.js';", true],
  ['src/coordinator/internal-request/x.ts', "import '../../common/json-splice.js';", false],
  ['src/coordinator/internal-request/x.ts', "import '../dispatch/pipeline.js';", true],
  ['src/coordinator/internal-request/x.ts', "import '../../scheduling/index.js';", true],
  ['src/coordinator/kv-routing/x.ts', "import '../internal-request/client-request.js';", false],
  ['src/coordinator/kv-routing/x.ts', "import '../dispatch/request/client-sink.js';", true],
  ['src/coordinator/kv-routing/x.ts', "import '../gateway/tenant-salt.js';", true],
  ['src/coordinator/kv-routing/x.ts', "await import('../dispatch/pipeline.js');", true],
  ['src/coordinator/scheduling-bridge/x.ts', "import '../internal-request/cache-salt.js';", false],
  ['src/coordinator/scheduling-bridge/x.ts', "import '../dispatch/pipeline.js';", true],
  ['src/coordinator/scheduling-bridge/x.ts', "import '../dispatch';", true],
  ['src/coordinator/scheduling-bridge/x.ts', "import '../dispatch/testing-extra/x.js';", true],
  ['src/coordinator/scheduling-bridge/x.test.ts', "import '../dispatch/testing/dispatch-harness.js';", false],
  [
    'src/coordinator/scheduling-bridge/x.test.ts',
    "await import('../dispatch/testing/words-engine.js');",
    false,
  ],
];

const IMPORT_RULES = new Set(['no-restricted-imports', 'no-restricted-syntax']);

describe('import direction (eslint.config.js)', () => {
  let eslint: ESLint;
  beforeAll(() => {
    eslint = new ESLint({ cwd: fileURLToPath(new URL('..', import.meta.url)) });
  });

  it.each(ROWS)('%s: %s → refused %s', async (file, source, refused) => {
    const [result] = await eslint.lintText(`${source}\n`, { filePath: file });
    const messages = result!.messages.filter((m) => m.ruleId !== null && IMPORT_RULES.has(m.ruleId));
    expect(messages.map((m) => m.message)).toHaveLength(refused ? 1 : 0);
    if (refused) expect(messages[0]!.message).toMatch(/must not import/);
  });
});
