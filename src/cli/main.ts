import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { commands } from './commands.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const program = new Command()
  .name('motor')
  .description('Prefill/decode disaggregated LLM serving coordinator')
  .version(pkg.version)
  .showHelpAfterError();

for (const register of commands) register(program);

await program.parseAsync(process.argv);
