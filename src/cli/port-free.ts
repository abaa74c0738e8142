import { createServer } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import { listenErrorText } from '../common/os-errors.js';
import { CliError } from './cli-error.js';

/**
 * Refuses a port something already listens on, before a command starts the processes that need it
 * (`motor up` checks the coordinator's before it spawns its children). Port 0 always passes.
 */
export async function assertPortFree(host: string, port: number, setting: string): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    await listen(server, port, host);
  } catch (err) {
    const text = listenErrorText(err);
    if (text === undefined) throw err;
    throw new CliError(`${text} (${setting})`);
  }
  await closeServer(server);
}
