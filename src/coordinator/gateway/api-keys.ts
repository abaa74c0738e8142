import { MotorError } from '../../common/motor-error.js';

/** `Authorization: Bearer` keys of `server.apiKeys`. */
export class ApiKeys {
  private readonly keys: ReadonlySet<string>;

  constructor(keys: readonly string[]) {
    this.keys = new Set(keys);
  }

  /** No keys configured, or the request's bearer token is one of them (keys are never ''). */
  allows(token: string): boolean {
    return this.keys.size === 0 || this.keys.has(token);
  }
}

export const unauthorizedError = (): MotorError =>
  new MotorError('unauthorized', 'missing or invalid API key (Authorization: Bearer <key>)');

export const BEARER_CHALLENGE: Readonly<Record<string, string>> = { 'www-authenticate': 'Bearer' };
