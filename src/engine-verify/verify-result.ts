/**
 * What `motor verify` reports: one row per check of an engine or of a prefill/decode pair. Each
 * observed fact names its number in test/fixtures/engines/README.md, so a drift row points at the
 * upstream source Motor's reading came from.
 */

/** `unknown`: the check applies but the probe could not decide; `skipped`: it does not apply. */
export type VerifyVerdict = 'ok' | 'drift' | 'unknown' | 'skipped';

export const VERIFY_CHECKS = [
  'auth',
  'metrics',
  'handoff_params',
  'eos_handover',
  'kv_loaded',
  'metaserver_call',
  'bootstrap',
] as const;
export type VerifyCheckName = (typeof VERIFY_CHECKS)[number];

export interface VerifyCheck {
  /** An instance id, or `<prefill id> → <decode id>` for a pair. */
  target: string;
  check: VerifyCheckName;
  verdict: VerifyVerdict;
  /** The fixtures README fact the expectation comes from; null when none applies. */
  fact: number | null;
  expected: string;
  seen: string;
  /** One line saying what to change (drift only). */
  fix: string | null;
}

export interface VerifyReport {
  /** Motor's version, so an attached report says which reading of the engines it checked. */
  motorVersion: string;
  checkedAt: string;
  /** The probe bounds the run kept to. */
  bounds: { probesPerPair: number; maxTokens: number; timeoutMs: number };
  checks: VerifyCheck[];
  drift: boolean;
}

type Row = Omit<VerifyCheck, 'verdict' | 'fix'>;

export const ok = (row: Row): VerifyCheck => ({ ...row, verdict: 'ok', fix: null });
export const unknown = (row: Row): VerifyCheck => ({ ...row, verdict: 'unknown', fix: null });
export const skipped = (row: Row): VerifyCheck => ({ ...row, verdict: 'skipped', fix: null });
export const drift = (row: Row, fix: string): VerifyCheck => ({ ...row, verdict: 'drift', fix });
