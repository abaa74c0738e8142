import OpenAI, { NotFoundError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startSimulator } from '../../simulator/server.js';
import { startCoordinator } from '../coordinator.js';

/** `GET /v1/models/{id}` through the real `openai` client's `models.retrieve`. */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const MODELS = ['org/model-a', 'plain'];

async function client(): Promise<OpenAI> {
  const log = createLogger('models-test', 'silent');
  const sim = await startSimulator({ role: 'union' }, log);
  closers.push(() => sim.close());
  const config = validateCoordinatorConfig(
    { server: { port: 0 }, instances: [{ url: sim.url, role: 'union', mode: 'direct', models: MODELS }] },
    {},
  );
  const running = await startCoordinator(config, log);
  closers.push(() => running.close());
  return new OpenAI({ baseURL: `${running.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

describe('GET /v1/models/{id}', () => {
  it.each(MODELS)('models.retrieve(%s) answers its entry', async (id) => {
    const model = await (await client()).models.retrieve(id);
    expect(model).toMatchObject({ id, object: 'model', owned_by: 'motor' });
  });

  it('an id with a raw slash (unencoded) is found too', async () => {
    const openai = await client();
    const res = await fetch(`${openai.baseURL}/models/org/model-a`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: 'org/model-a' });
  });

  it('an unknown id is a 404 in OpenAI’s shape (NotFoundError)', async () => {
    const err: unknown = await (await client()).models.retrieve('nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'model_not_found',
      param: 'model',
    });
  });
});
