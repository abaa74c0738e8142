import type { Logger } from '../common/logger.js';
import { ERROR_CODES, MotorError, type MotorErrorCode } from '../common/motor-error.js';

/**
 * What a client is told when its request failed. An instance's failure carries the instance's id, its
 * URL or host and the engine's own 5xx text in its message: the log, the metrics and the management
 * API keep that, a client gets the code's `clientMessage` instead (an engine's 5xx text can hold
 * paths, addresses or other tenants' data, and instance names map the private fleet). The code, status,
 * type and `param` stay, so clients and SDKs retry as before. `server.instanceErrorsToClients` (a
 * private deployment debugging its fleet) passes the full message through.
 *
 * An engine's 4xx answer (`engine_rejected`) is the client's own mistake in the engine's words and
 * passes through unchanged either way.
 */
export type ClientErrorFilter = (err: MotorError, rootRequestId: string) => MotorError;

const CLIENT_MESSAGES: Partial<Record<MotorErrorCode, string>> = Object.fromEntries(
  Object.entries(ERROR_CODES).flatMap(([code, entry]) =>
    'clientMessage' in entry ? [[code, entry.clientMessage]] : [],
  ),
);

const passThrough: ClientErrorFilter = (err) => err;

/** The filter of `server.instanceErrorsToClients`; a replaced message is logged whole, once. */
export function clientErrorFilter(instanceErrorsToClients: boolean, log: Logger): ClientErrorFilter {
  if (instanceErrorsToClients) return passThrough;
  return (err, rootRequestId) => {
    const message = CLIENT_MESSAGES[err.code];
    if (message === undefined) return err;
    log.warn(
      { root_request_id: rootRequestId, code: err.code, instance_id: err.instanceId, err: err.message },
      'request failed (the client got the generic message of its code)',
    );
    const text = err.clientNote === undefined ? message : `${message}; ${err.clientNote}`;
    return new MotorError(err.code, text, {
      status: err.status,
      retryable: err.retryable,
      param: err.param,
    });
  };
}
