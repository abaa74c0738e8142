import { z } from 'zod';
import {
  dispatchEndpointSchema,
  dispatchEndpointsSchema,
  dispatchStopRequestSchema,
  dispatchStopResponseSchema,
  motorDispatchSchema,
  prefillResultSchema,
} from './schemas.js';

const MODELS = {
  DispatchEndpoint: dispatchEndpointSchema,
  DispatchEndpoints: dispatchEndpointsSchema,
  MotorDispatch: motorDispatchSchema,
  PrefillResult: prefillResultSchema,
  DispatchStopRequest: dispatchStopRequestSchema,
  DispatchStopResponse: dispatchStopResponseSchema,
} as const;

export type ProtocolModelName = keyof typeof MODELS;
export const PROTOCOL_MODEL_NAMES = Object.keys(MODELS) as ProtocolModelName[];

/**
 * JSON Schema (draft 2020-12) of one wire model, as accepted on input: defaulted fields are optional.
 * The schema-version major check is a refinement that JSON Schema cannot express; it is described instead.
 */
export function protocolJsonSchema(name: ProtocolModelName): Record<string, unknown> {
  return z.toJSONSchema(MODELS[name], { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
