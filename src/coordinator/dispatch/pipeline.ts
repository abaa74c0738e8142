/**
 * The dispatch pipeline, in the order one client request passes through it, and the surface the
 * gateway and the coordinator's wiring use. Each stage is a folder:
 *
 * 1. request/    the client request as every attempt sees it (RequestContext), its sink and cancellation
 *                (the internal request itself is ../internal-request/: KV routing and scheduling read it too)
 * 2. attempt/    the Dispatcher's loop: pick a route, run one attempt, back off and retry, or fail
 * 3. flows/      what an attempt does with its route: single, handoff (P then D), trigger + bootstrap
 * 4. transport/  one leg to one instance: LegTransport (engine proxy or direct to a stock engine)
 * 5. relay/      the commit barrier, then the engine's answer to the client (stream, JSON, assembled)
 * 6. migration/  after commit: the decode leg failed, so a continuation resumes on another instance
 *
 * testing/ holds the in-process harness and fake engines (test support, not built).
 */
export { Dispatcher, type DispatcherDeps } from './attempt/dispatcher.js';
export { triggerKey, type PendingTrigger, type PendingTriggers } from './flows/pending-trigger.js';
export { RequestCancellation } from './request/request-cancellation.js';
export type { ApiKind, ClientRequest } from '../internal-request/client-request.js';
export { HttpClientSink, type ClientSink } from './request/client-sink.js';
export { OpenAiPassThroughSink } from './request/openai-pass-through-sink.js';
