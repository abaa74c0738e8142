/**
 * The ids a vLLM engine may report for a request Motor sent with `X-Request-Id: <engine request id>`,
 * mapped back to that id. One home for this rule: the engine proxy's and the coordinator's
 * `/v1/metaserver` both use it.
 *
 * What vLLM builds from the header (test/fixtures/engines/README.md facts 2 and 3):
 * - `OpenAIServing._base_request_id` keeps `X-Request-Id` verbatim; chat prefixes `chatcmpl-`,
 *   completions `cmpl-` and appends `-<prompt index>` (vllm-project/vllm
 *   `vllm/entrypoints/openai/chat_completion/serving.py`, `completion/serving.py`, 2026-01 index).
 * - vLLM ≥ 0.14 appends `-` + 8 random hex chars to the internal id (`InputProcessor.assign_request_id`,
 *   `vllm/v1/engine/input_processor.py`); vllm-ascend v0.14.0rc1's layer-wise connector sends it raw,
 *   v0.15.0rc1+ strips it (`get_external_request_id`, `mooncake_layerwise_connector.py`).
 */

const PREFIXES = ['chatcmpl-', 'cmpl-'] as const;
/** vLLM's `f"{external}-{random_uuid():.8}"`: `uuid4().hex`, so lowercase hex. */
const RANDOM_SUFFIX = /-[0-9a-f]{8}$/;
/** Completions' `-<prompt index>`. */
const PROMPT_INDEX = /-\d+$/;

/**
 * Candidate engine request ids for an id a vLLM engine reported, most literal first: the id itself,
 * then without the endpoint prefix, without the random suffix, without the prompt index, without
 * both. Callers match them EXACTLY against the ids they issued, so an id that itself ends in
 * `-<8 hex>` or `-<digits>` still matches (its literal form comes before the stripped ones).
 */
export function engineRequestIdCandidates(reported: string): string[] {
  const out = [reported];
  const prefix = PREFIXES.find((p) => reported.startsWith(p));
  if (prefix === undefined) return out;
  const rest = reported.slice(prefix.length);
  const unsuffixed = rest.replace(RANDOM_SUFFIX, '');
  const forms =
    prefix === 'cmpl-'
      ? [rest, unsuffixed, rest.replace(PROMPT_INDEX, ''), unsuffixed.replace(PROMPT_INDEX, '')]
      : [rest, unsuffixed];
  for (const id of forms) if (id.length > 0 && !out.includes(id)) out.push(id);
  return out;
}

/** The first of `candidates` that `lookup` knows, with the id it was found under. */
export function findByCandidates<T>(
  candidates: readonly string[],
  lookup: (id: string) => T | undefined,
): { id: string; value: T } | undefined {
  for (const id of candidates) {
    const value = lookup(id);
    if (value !== undefined) return { id, value };
  }
  return undefined;
}

/** How vLLM spelled `bare` (for metrics): which release family a fleet's connectors belong to. */
export type RequestIdForm = 'bare' | 'chat' | 'chat_suffixed' | 'completions' | 'completions_suffixed';

/** The form of `reported`, known to match the issued id `bare` (see `engineRequestIdCandidates`). */
export function requestIdForm(reported: string, bare: string): RequestIdForm {
  if (reported === bare) return 'bare';
  if (reported.startsWith('chatcmpl-')) return reported === `chatcmpl-${bare}` ? 'chat' : 'chat_suffixed';
  // cmpl-<bare>-<i>, then maybe vLLM's -<8 hex>
  return /^-\d+$/.test(reported.slice(`cmpl-${bare}`.length)) ? 'completions' : 'completions_suffixed';
}
