import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JsonSource } from '../../common/json-splice.js';
import type { MotorError } from '../../common/motor-error.js';
import type { ClientSink } from '../dispatch/pipeline.js';
import type { ClientRequest } from '../internal-request/client-request.js';

/** What an adapter may read besides the parsed body while it translates a request. */
export interface AdapterContext {
  /** The caller's API key ('' when the gateway has no keys configured). */
  readonly apiKey: string;
  /** The root request id this request carries (ids in the answer derive from it). */
  readonly rootRequestId: string;
  /** The bytes the body was parsed from: pass them on while the body is not rewritten. */
  readonly source: JsonSource | null;
  /** The tenant stored state belongs to (a hash of the API key or tenant header; made on first call). */
  tenant(): string;
}

/** A client request as the pipeline runs it, and the sink that renders the answer in the API's shape. */
export interface Translated {
  /** A chat or completion body in the engines' OpenAI shape; `source` null when the body was rewritten. */
  readonly request: ClientRequest;
  /** The client side of this request: the pipeline's OpenAI frames → this API's wire shape. */
  createSink(res: ServerResponse): ClientSink;
}

/**
 * One client API's front-end. The gateway builds its route table from the adapters (api-adapters.ts)
 * and runs, for each: `apiKey` → loop guard → `headerError` → admission → body → `toInternal` → the
 * dispatcher with the translated request's sink. Nothing in the dispatch flows knows which API a
 * request came from.
 *
 * `kind` says how the gateway serves the route: `generation` runs the P/D pipeline (routing, prefill
 * and decode legs, retries, migration). An API answered by one instance alone (embeddings, tokenize)
 * is another kind with its own handler, not a generation adapter with flags.
 */
export interface ApiAdapter {
  readonly kind: 'generation';
  /** A stable label for logs: `openai-chat`, `anthropic-messages`, … */
  readonly api: string;
  /** The `POST` route the API is served on. */
  readonly path: string;
  /** The caller's key from the credentials this API accepts. */
  apiKey(req: IncomingMessage): string;
  /** A header the API requires in a given form, checked before admission; null when it is fine. */
  headerError?(req: IncomingMessage): MotorError | null;
  /** The parsed client body → the internal request; throws MotorError naming the field on bad input. */
  toInternal(body: unknown, ctx: AdapterContext): Promise<Translated> | Translated;
  /** A refusal before dispatch (auth, admission, validation) in this API's error shape. */
  renderError(res: ServerResponse, err: MotorError, headers?: Readonly<Record<string, string>>): void;
}
