import type { JsonSource } from '../../../common/json-splice.js';

export type ApiKind = 'chat' | 'completion';

/** A validated client request (gateway/request-validation.ts), as dispatch and scheduling read it. */
export interface ClientRequest {
  kind: ApiKind;
  body: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** The client asked for token ids (`return_token_ids`); otherwise they are stripped. */
  wantsTokenIds: boolean;
  /** The bytes `body` was parsed from (gateway): leg bodies are spliced from them (json-splice.ts). */
  source?: JsonSource | null;
}
