import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { jsonInstance, SchemaError, type InstanceSource } from './json-instance.js';

/** A fixed source: words "w0", "w1", … and alternating draws. */
function source(): InstanceSource {
  let i = 0;
  let d = 0;
  return { next: () => (d++ % 2 === 0 ? 0.25 : 0.75), word: () => `w${i++}` };
}

const ajv = new Ajv2020({ strict: false });

const CASES: Array<[string, Record<string, unknown>, unknown]> = [
  ['empty schema → {}', {}, {}],
  [
    'object: required properties only',
    { type: 'object', properties: { a: { type: 'string' }, b: { type: 'integer' } }, required: ['a'] },
    { a: 'w0' },
  ],
  ['enum → its first value', { enum: ['celsius', 'fahrenheit'] }, 'celsius'],
  ['const', { const: 42 }, 42],
  ['integer ≥ minimum', { type: 'integer', minimum: 3 }, 3],
  ['integer > exclusiveMinimum', { type: 'integer', exclusiveMinimum: 3 }, 4],
  ['integer ≤ negative maximum', { type: 'integer', maximum: -2 }, -2],
  ['integer multipleOf within bounds', { type: 'integer', minimum: 5, multipleOf: 4 }, 8],
  ['number, no bounds → 0', { type: 'number' }, 0],
  ['number > exclusiveMinimum 0', { type: 'number', exclusiveMinimum: 0, maximum: 1 }, 0.5],
  ['boolean', { type: 'boolean' }, true],
  ['null', { type: 'null' }, null],
  ['nullable type list → the non-null type', { type: ['null', 'string'] }, 'w0'],
  ['string minLength repeats words', { type: 'string', minLength: 5 }, 'w0w1w2'],
  ['string maxLength cuts', { type: 'string', maxLength: 1 }, 'w'],
  ['array: minItems items', { type: 'array', items: { type: 'integer' }, minItems: 2 }, [0, 0]],
  ['array: no minItems → []', { type: 'array', items: { type: 'string' } }, []],
  ['anyOf → the first', { anyOf: [{ type: 'boolean' }, { type: 'string' }] }, true],
  [
    'allOf merges properties and required',
    {
      allOf: [
        { properties: { a: { const: 1 } }, required: ['a'] },
        { properties: { b: { const: 2 } }, required: ['b'] },
      ],
    },
    { a: 1, b: 2 },
  ],
  [
    'nested objects and arrays',
    {
      type: 'object',
      properties: {
        loc: {
          type: 'object',
          properties: {
            lat: { type: 'number' },
            tags: { type: 'array', items: { enum: ['x'] }, minItems: 1 },
          },
          required: ['lat', 'tags'],
          additionalProperties: false,
        },
      },
      required: ['loc'],
    },
    { loc: { lat: 0, tags: ['x'] } },
  ],
  [
    'local $ref into $defs (zod / pydantic schemas)',
    {
      type: 'object',
      properties: { step: { $ref: '#/$defs/Step' } },
      required: ['step'],
      $defs: {
        Step: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, required: ['n'] },
      },
    },
    { step: { n: 1 } },
  ],
  [
    'minProperties adds optional properties',
    { type: 'object', properties: { a: { const: 1 } }, minProperties: 1 },
    { a: 1 },
  ],
];

describe('jsonInstance', () => {
  it.each(CASES)('%s', (_name, schema, expected) => {
    const value = jsonInstance(schema, source());
    expect(value).toEqual(expected);
    expect(ajv.validate(schema, value), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('is a function of its source: the same draws give the same instance', () => {
    const schema = {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'boolean' } },
      required: ['a', 'b'],
    };
    expect(jsonInstance(schema, source())).toEqual(jsonInstance(schema, source()));
  });

  it.each<[string, Record<string, unknown>]>([
    ['an unresolvable $ref', { $ref: '#/$defs/Missing' }],
    ['a remote $ref', { $ref: 'https://example.com/s.json' }],
    ['an empty enum', { enum: [] }],
    ['maxLength below minLength', { type: 'string', minLength: 3, maxLength: 1 }],
    ['a $ref cycle that must recurse', { $ref: '#/$defs/A', $defs: { A: { $ref: '#/$defs/A' } } }],
    ['no integer in the bounds', { type: 'integer', minimum: 1.2, maximum: 1.8 }],
  ])('refuses %s', (_name, schema) => {
    expect(() => jsonInstance(schema, source())).toThrow(SchemaError);
  });
});
