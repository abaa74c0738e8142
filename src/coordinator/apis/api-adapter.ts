import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MotorError } from '../../common/motor-error.js';
import type { ClientRequest } from '../dispatch/request/client-request.js';
import type { ClientSinkLike } from '../dispatch/request/client-sink.js';

/** What an adapter learns about the caller before it translates (scoping of stored state). */
export interface AdapterContext {
  /** The caller's API key ('' when the gateway has no keys configured). */
  readonly apiKey: string;
  /** The tenant stored state belongs to (derived from the API key). */
  readonly tenant: string;
  /** The root request id this request will carry. */
  readonly rootRequestId: string;
}

/**
 * A client request translated to a chat-completions body (the gateway then validates it with the chat
 * rules, one home for them), plus what the adapter's sink needs.
 */
export interface Translated {
  readonly chat: Record<string, unknown>;
}

/**
 * One client API front-end that is not OpenAI chat/completions: its request → the internal chat request
 * every flow runs, and the pipeline's chat frames → its own wire shape (createSink), frame by frame.
 */
export interface ApiAdapter<T extends Translated = Translated> {
  readonly api: string;
  /** The caller's key: `Authorization: Bearer`, and for Anthropic also `x-api-key`. */
  apiKey(req: IncomingMessage): string;
  toInternal(body: unknown, ctx: AdapterContext): Promise<T> | T;
  createSink(
    res: ServerResponse,
    rootRequestId: string,
    translated: T,
    client: ClientRequest,
  ): ClientSinkLike;
  renderError(res: ServerResponse, err: MotorError, headers?: Readonly<Record<string, string>>): void;
}
