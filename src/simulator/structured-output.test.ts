import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, post, sseEvents } from './testing/index.js';

/** Content constrained to JSON (structured-output.ts): valid against the request's schema. */
const log = createLogger('sim-structured', 'silent');
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timeScale: 0 }, log);
});
afterAll(async () => {
  await sim.close();
});

const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer', minimum: 18 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
};
const valid = new Ajv2020().compile(SCHEMA);
const prompt = { model: 'motor-sim-7b', prompt: 'Describe a person as JSON' };

describe('structured content', () => {
  it.each<[string, string, Record<string, unknown>]>([
    [
      'chat response_format json_schema',
      '/v1/chat/completions',
      chatBody('A person', {
        response_format: { type: 'json_schema', json_schema: { name: 'p', schema: SCHEMA, strict: true } },
      }),
    ],
    [
      'chat structured_outputs.json (object)',
      '/v1/chat/completions',
      chatBody('A person', { structured_outputs: { json: SCHEMA } }),
    ],
    [
      'completions structured_outputs.json (JSON text)',
      '/v1/completions',
      { ...prompt, structured_outputs: { json: JSON.stringify(SCHEMA) } },
    ],
  ])('%s → content valid against the schema, finish "stop"', async (_name, path, body) => {
    const r = await post(sim.url, path, body);
    expect(r.status).toBe(200);
    const c = r.json.choices[0];
    const text = (c.message?.content ?? c.text) as string;
    expect(valid(JSON.parse(text)), JSON.stringify(valid.errors)).toBe(true);
    expect(c.finish_reason).toBe('stop');
  });

  it('json_object → a JSON object; the stream carries the same text', async () => {
    const body = chatBody('Any JSON', { response_format: { type: 'json_object' }, seed: 2 });
    const [ns, s] = await Promise.all([
      post(sim.url, '/v1/chat/completions', body),
      post(sim.url, '/v1/chat/completions', { ...body, stream: true }),
    ]);
    const text = ns.json.choices[0].message.content as string;
    expect(JSON.parse(text)).toBeTypeOf('object');
    const frames = sseEvents(s.text).slice(0, -1) as Array<{
      choices: Array<{ delta: { content?: string } }>;
    }>;
    expect(frames.map((f) => f.choices[0]!.delta.content ?? '').join('')).toBe(text);
  });

  it('guided_json is ignored (removed in vLLM 0.12): plain text', async () => {
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chatBody('x', { guided_json: SCHEMA, max_tokens: 3 }),
    );
    expect(r.json.choices[0].message.content).toMatch(/^( \w+){3}$/);
  });

  it.each<[string, Record<string, unknown>]>([
    ['structured_outputs regex', { structured_outputs: { regex: 'a+' } }],
    ['response_format structural_tag', { response_format: { type: 'structural_tag', format: {} } }],
    [
      'an unresolvable $ref',
      {
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'x', schema: { $ref: '#/$defs/none' } },
        },
      },
    ],
  ])('400 for %s', async (_name, extra) => {
    const r = await post(sim.url, '/v1/chat/completions', chatBody('x', extra));
    expect(r.status).toBe(400);
  });
});
