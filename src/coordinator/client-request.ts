export type ApiKind = 'chat' | 'completion';

/** A validated client request (gateway/request-validation.ts), as dispatch and scheduling read it. */
export interface ClientRequest {
  kind: ApiKind;
  body: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** The client asked for token ids (`return_token_ids`); otherwise they are stripped. */
  wantsTokenIds: boolean;
}
