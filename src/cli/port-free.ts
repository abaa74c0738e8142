import { createServer } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import { listenError } from './cli-error.js';

/**
 * Refuses a port something already listens on, before a command starts the processes that need it
 * (`motor up` checks the coordinator's before it spawns its children; `motor coordinator` before it
 * reads its fleet). Port 0 always passes.
 */
export async function assertPortFree(host: string, port: number, setting: string): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    await listen(server, port, host);
  } catch (err) {
    throw listenError(err, setting) ?? err;
  }
  await closeServer(server);
}
