import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readStructuredFile } from './structured-file.js';

const dir = mkdtempSync(join(tmpdir(), 'motor-structured-'));

describe('readStructuredFile: a YAML error is one line with its line number and the line itself', () => {
  it.each([
    [
      'unclosed flow sequence',
      'server:\n  port: [1\nx: 2\n',
      /invalid YAML at line 3, column 1: .* \(line 3: "x: 2"\)$/,
    ],
    [
      'tab indentation',
      'server:\n\tport: 1\n',
      /invalid YAML at line 2, column \d+: .* \(line 2: "port: 1"\)$/,
    ],
    ['bad mapping', 'a: b: c\n', /invalid YAML at line 1, column \d+: .*\(line 1: "a: b: c"\)$/],
  ])('%s', async (_name, text, message) => {
    const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, text);
    const error = (await readStructuredFile(file, 'config file').catch((err: unknown) => err)) as Error;
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain('\n');
    expect(error.message).not.toMatch(/:$/); // no dangling colon
  });
});
