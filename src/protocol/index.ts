/** Motor's wire protocol: a faithful TypeScript port of the seed's `dispatch_protocol.py`. */
export * from './constants.js';
export * from './enums.js';
export * from './classification.js';
export * from './connector-table.js';
export * from './capabilities.js';
export * from './schemas.js';
export * from './parse.js';
export * from './json-schema.js';
export * from './bootstrap-room.js';
export * from './engine-profile.js';
export * from './internal-fields.js';
export * from './bootstrap-address.js';
