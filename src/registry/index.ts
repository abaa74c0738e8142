/** Motor's control plane: the instance registry (memory / etcd), health, drain, management API. */
export * from './instance-record.js';
export * from './registry.js';
export * from './memory-registry.js';
export * from './etcd-registry.js';
export * from './create-registry.js';
export * from './health-prober.js';
export * from './wait-for-event.js';
export * from './management-api.js';
export * from './heartbeat-client.js';
export * from './instance-url-policy.js';
