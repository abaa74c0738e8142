import { readFileSync } from 'node:fs';

/**
 * Readers for the files in deploy/ and the shell blocks of docs/deploy.md, so test/deploy.test.ts runs
 * the command lines exactly as written there: systemd units (ExecStart, EnvironmentFile, `%i`,
 * `${VAR}`), env files, the Dockerfile's ENTRYPOINT/CMD, and shell lines. Only the syntax those files
 * use is supported; anything else throws rather than being guessed.
 */

/** `KEY=value` lines; `#` comments and blank lines skipped; no quoting (systemd and docker agree). */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`env file line without KEY=: ${line}`);
    out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

/**
 * An env file's values with each `replace-me…` example secret replaced by a generated stand-in (the
 * same stand-in for the same placeholder, so files that must share a secret still do), as the doc tells
 * operators to do: Motor refuses the placeholders.
 */
export function withGeneratedSecrets(env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env))
    out[key] = value.replace(/^replace-me/, 'generated-for-test');
  return out;
}

/** A unit's `[Service]` settings (last one wins), backslash continuations joined. */
export function parseUnitService(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let section = '';
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const t = line.trim();
    if (t === '' || t.startsWith('#') || t.startsWith(';')) continue;
    if (t.startsWith('[')) section = t;
    else if (section === '[Service]') {
      const eq = t.indexOf('=');
      out[t.slice(0, eq)] = t.slice(eq + 1);
    }
  }
  return out;
}

/**
 * Splits a command line into words as a shell (or systemd's ExecStart) does for the subset used
 * here: whitespace, '…', "…" and backslash-newline; `$VAR` / `${VAR}` outside single quotes come from
 * `vars` (a missing one throws: the doc or unit names a variable nothing sets).
 */
export function splitWords(line: string, vars: Record<string, string> = {}): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  const src = line.replace(/\\\n/g, ' ');
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
      continue;
    }
    if (c === '$') {
      const m = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(src.slice(i));
      if (!m) throw new Error(`unsupported $ in: ${line}`);
      const name = m[1] ?? m[2]!;
      const value = vars[name];
      if (value === undefined) throw new Error(`$${name} is not set (in: ${line})`);
      i += m[0].length - 1;
      const alone = word === null && quote === null && (i + 1 === src.length || /\s/.test(src[i + 1]!));
      if (m[2] !== undefined && alone) words.push(...value.split(/\s+/).filter((w) => w !== ''));
      else word = (word ?? '') + value;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = null;
      else word += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === '\\' || c === ';' || c === '|' || c === '&' || c === '`') {
      throw new Error(`unsupported shell syntax '${c}' in: ${line}`);
    } else word = (word ?? '') + c;
  }
  if (quote) throw new Error(`unterminated quote in: ${line}`);
  if (word !== null) words.push(word);
  return words;
}

/** The exec-form JSON arrays of a Dockerfile's last ENTRYPOINT and CMD, and its RUN lines. */
export function parseDockerfile(text: string): { entrypoint: string[]; cmd: string[]; runs: string[] } {
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  const last = (instr: string): string[] => {
    const line = lines.filter((l) => l.startsWith(`${instr} `)).at(-1);
    if (!line) return [];
    return JSON.parse(line.slice(instr.length + 1)) as string[];
  };
  const runs = lines.filter((l) => l.startsWith('RUN ')).map((l) => l.slice(4));
  return { entrypoint: last('ENTRYPOINT'), cmd: last('CMD'), runs };
}

/** The fenced code blocks of a markdown file, with their info string. */
export function codeBlocks(markdown: string): { lang: string; body: string }[] {
  const out: { lang: string; body: string }[] = [];
  const re = /^```(\S*)\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(markdown); m; m = re.exec(markdown)) out.push({ lang: m[1]!, body: m[2]! });
  return out;
}

/** The commands of a shell block: comments dropped, continuations joined, one string per command. */
export function shellCommands(block: string): string[] {
  return block
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter((l) => l !== '');
}

export const readText = (path: string): string => readFileSync(path, 'utf8');
