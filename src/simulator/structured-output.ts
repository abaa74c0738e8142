import { isPlainObject } from '../common/http.js';
import { RequestError } from './request-error.js';

/** Content constrained to JSON: valid against `schema`, or any JSON object (`schema: null`). */
export interface JsonFormat {
  schema: Record<string, unknown> | null;
}

/**
 * The JSON a request constrains its content to, or null (free text). vLLM (main 2026,
 * vllm/entrypoints/generate/base/protocol.py `structured_outputs_from_response_format`):
 * `response_format` `json_object` → any object, `json_schema` → `json_schema.schema`, `text` → none,
 * and it overrides `structured_outputs` (`json`: a schema object or its JSON text; `json_object:
 * true`). SGLang reads `response_format` the same way (`ChatCompletionRequest.to_sampling_params`,
 * python/sglang/srt/entrypoints/openai/protocol.py). The pre-0.12 `guided_json` is not read: vLLM
 * removed the `guided_*` fields in v0.12.0 (PR 29326) and ignores them since, as every profile
 * here does. Constraints the simulator cannot satisfy (regex, grammar, choice, structural tags) → 400.
 */
export function parseJsonFormat(body: Record<string, unknown>): JsonFormat | null {
  const rf = body.response_format;
  if (rf !== undefined && rf !== null) {
    if (!isPlainObject(rf))
      throw new RequestError(400, "'response_format' must be an object", 'response_format');
    if (rf.type === 'text') return structuredOutputs(body.structured_outputs);
    if (rf.type === 'json_object') return { schema: null };
    if (rf.type === 'json_schema') {
      const js = rf.json_schema;
      if (!isPlainObject(js) || (js.schema !== undefined && !isPlainObject(js.schema)))
        throw new RequestError(
          400,
          "'response_format.json_schema' must be {name, schema}",
          'response_format',
        );
      return { schema: (js.schema as Record<string, unknown> | undefined) ?? null };
    }
    throw new RequestError(
      400,
      `response_format type ${JSON.stringify(rf.type)} is not supported by the simulator`,
      'response_format',
    );
  }
  return structuredOutputs(body.structured_outputs);
}

/** StructuredOutputsParams constraints (vllm/sampling_params.py) other than json / json_object. */
const UNSUPPORTED = ['regex', 'choice', 'grammar', 'structural_tag'];

function structuredOutputs(so: unknown): JsonFormat | null {
  if (so === undefined || so === null) return null;
  if (!isPlainObject(so))
    throw new RequestError(400, "'structured_outputs' must be an object", 'structured_outputs');
  if (so.json !== undefined && so.json !== null) {
    let schema: unknown = so.json;
    if (typeof schema === 'string') {
      try {
        schema = JSON.parse(schema) as unknown;
      } catch {
        throw new RequestError(400, "'structured_outputs.json' is not valid JSON", 'structured_outputs');
      }
    }
    if (!isPlainObject(schema))
      throw new RequestError(400, "'structured_outputs.json' must be a JSON schema", 'structured_outputs');
    return { schema };
  }
  if (so.json_object === true) return { schema: null };
  const other = UNSUPPORTED.filter((k) => so[k] !== null && so[k] !== undefined);
  if (other.length === 0) return null;
  throw new RequestError(
    400,
    `structured_outputs ${other.join(', ')} is not supported by the simulator (json and json_object are)`,
    'structured_outputs',
  );
}
