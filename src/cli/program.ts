import { Command } from 'commander';
import { commands } from './commands.js';

/** The `motor` program with every command registered, not parsed: main.ts runs it, docs:gen walks it. */
export function createProgram(version: string): Command {
  const program = new Command()
    .name('motor')
    .description('Prefill/decode disaggregated LLM serving coordinator')
    .version(version)
    .showHelpAfterError();
  for (const register of commands) register(program);
  return program;
}
