/** Wire constants, identical to the seed's `dispatch_protocol.py`. */
export const MOTOR_DISPATCH_KEY = '_motor_dispatch';
export const MOTOR_PREFILL_RESULT_KEY = '_motor_prefill_result';
export const MOTOR_DISPATCH_SCHEMA_VERSION = '1.0';

export const DISPATCH_PROFILE_KEY = 'dispatch_profile';
export const KV_TRANSFER_CONFIG_KEY = 'kv_transfer_config';
export const KV_CONNECTOR_KEY = 'kv_connector';
export const KV_CONNECTOR_EXTRA_CONFIG_KEY = 'kv_connector_extra_config';
export const KV_CONNECTORS_KEY = 'connectors';

/** Object discriminator carried by every prefill result. */
export const PREFILL_RESULT_OBJECT = 'motor.prefill_result';
