/**
 * The example secrets shipped in deploy/ and docs/deploy.md all start with `replace-me`. A process
 * started with one unchanged would run with a credential anyone can read in this repository, so every
 * place a secret enters Motor refuses it (one rule, here).
 */
const PLACEHOLDER = /^replace-me/i;

/** A one-line problem naming `where` when `value` is still a placeholder; undefined otherwise. */
export function placeholderSecretProblem(
  where: string,
  value: string | null | undefined,
): string | undefined {
  if (value === null || value === undefined || !PLACEHOLDER.test(value.trim())) return undefined;
  return `${where}: still the "replace-me…" example value — generate a secret (openssl rand -base64 32 | tr -d '/+=')`;
}

/** The problems among named values (for a list of keys, name each by its index). */
export function placeholderSecretProblems(
  named: Iterable<readonly [where: string, value: string | null | undefined]>,
): string[] {
  const problems: string[] = [];
  for (const [where, value] of named) {
    const problem = placeholderSecretProblem(where, value);
    if (problem !== undefined) problems.push(problem);
  }
  return problems;
}
