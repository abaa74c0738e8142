import { describe, expect, it } from 'vitest';
import { buildInstanceRecord, instanceRecordSchema, parseRegistration } from './instance-record.js';

const registration = { id: 'u-0', role: 'union', url: 'http://127.0.0.1:8000', dispatch_capabilities: [] };
const build = (input: unknown) =>
  buildInstanceRecord(parseRegistration(input), undefined, { source: 'api', lease: null, nowMs: 1 });

describe('instance record kv_events', () => {
  it.each([
    ['absent', registration, null],
    [
      'given',
      { ...registration, kv_events: { endpoint: 'ipc:///tmp/kv' } },
      { endpoint: 'ipc:///tmp/kv', topic: '' },
    ],
  ])('%s in the registration → %j in the stored record, which reads back the same', (_n, input, expected) => {
    const record = build(input);
    expect(record.kv_events).toEqual(expected);
    expect(instanceRecordSchema.parse(JSON.parse(JSON.stringify(record)))).toEqual(record);
  });

  it('a record stored before kv_events existed (etcd) reads back with kv_events null', () => {
    const { kv_events: _dropped, ...old } = build(registration);
    expect(instanceRecordSchema.parse(old).kv_events).toBeNull();
  });
});
