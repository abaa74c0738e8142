import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { fileErrorText } from './os-errors.js';

/** A config file that cannot be read or parsed; the message is one line naming the file. */
export class StructuredFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StructuredFileError';
  }
}

/**
 * Reads a JSON or YAML file (YAML 1.2 is a superset of JSON: one parser for both; a `.json` file's
 * syntax errors are reported as JSON's). `label` names the file in errors: `"config file x.yaml: not
 * found"`. An empty file is `{}`.
 */
export async function readStructuredFile(file: string, label: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new StructuredFileError(`${label} ${file}: ${fileErrorText(err)}`);
  }
  if (/\.json$/i.test(file)) {
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw new StructuredFileError(`${label} ${file}: invalid JSON: ${(err as Error).message}`);
    }
  }
  try {
    return (parseYaml(text) as unknown) ?? {};
  } catch (err) {
    // the yaml package appends a multi-line code frame; one line keeps the line number and the
    // offending line itself instead
    const reason = (err as Error).message.split('\n', 1)[0]!.replace(/ at line \d+, column \d+:?$/, '');
    const at = (err as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    if (at === undefined) throw new StructuredFileError(`${label} ${file}: invalid YAML: ${reason}`);
    const excerpt = text.split(/\r?\n/)[at.line - 1]?.trim() ?? '';
    throw new StructuredFileError(
      `${label} ${file}: invalid YAML at line ${at.line}, column ${at.col}: ${reason}` +
        (excerpt ? ` (line ${at.line}: ${JSON.stringify(excerpt)})` : ''),
    );
  }
}

/** {@link readStructuredFile} for a file whose top level must be a mapping. */
export async function readStructuredMapping(file: string, label: string): Promise<Record<string, unknown>> {
  const value = await readStructuredFile(file, label);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new StructuredFileError(`${label} ${file}: expected a mapping at the top level`);
  return value as Record<string, unknown>;
}
