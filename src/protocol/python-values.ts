/**
 * The few Python value semantics the seed's classification relies on (`x or default`, `str(x)`,
 * `dict.get`), so the port decides exactly as the seed does on the same JSON input.
 */

/** Python truthiness for JSON-like values: None, False, 0, "", [] and {} are falsy. */
export function pyTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (value instanceof Map || value instanceof Set) return value.size > 0;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

/**
 * Python `str(x)` for scalars. Containers get a representation that can never equal a connector or
 * profile name (JavaScript's `String(["nixlconnector"])` would, Python's `str` does not).
 */
export function pyStr(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return `<${Array.isArray(value) ? 'list' : 'object'}>`;
}

/** Python `repr` for error messages: strings quoted, the rest as `str`. */
export function pyRepr(value: unknown): string {
  return typeof value === 'string' ? `'${value}'` : pyStr(value);
}

/** `str(value or "").strip().lower()` */
export function normalized(value: unknown): string {
  return pyStr(pyTruthy(value) ? value : '')
    .trim()
    .toLowerCase();
}

/** A JSON object (the seed's `isinstance(x, dict)`). */
export function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Map);
}

/** `config.get(key, default)` for dicts and Maps, `getattr(config, key, default)` otherwise. */
export function configGet(config: unknown, key: string, fallback: unknown = undefined): unknown {
  if (config === null || config === undefined) return fallback;
  if (config instanceof Map) return config.has(key) ? config.get(key) : fallback;
  if (typeof config === 'object' && key in config) {
    const value = (config as Record<string, unknown>)[key];
    return value === undefined ? fallback : value;
  }
  return fallback;
}
