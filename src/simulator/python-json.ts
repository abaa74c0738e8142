/**
 * JSON as Python's `json.dumps(value, ensure_ascii=False)` writes it: `", "` between items and
 * `": "` after keys. vLLM's tool parsers re-serialise a call's arguments that way (e.g.
 * `Hermes2ProToolParser.extract_tool_calls`, vllm/tool_parsers/hermes_tool_parser.py), and a model's
 * constrained JSON usually has the same spacing, so the simulator's arguments and structured
 * content look like an engine's.
 */
export function pythonJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    if (v !== undefined) parts.push(`${JSON.stringify(k)}: ${pythonJson(v)}`);
  }
  return `{${parts.join(', ')}}`;
}
