import { Command } from 'commander';
import { commands } from './commands.js';

/** The `motor` program with every command registered, not parsed: main.ts runs it, docs:gen walks it. */
export function createProgram(version: string): Command {
  const program = new Command()
    .name('motor')
    .description('Prefill/decode disaggregated LLM serving coordinator')
    .version(version)
    .showHelpAfterError(usageHint('motor'))
    // main.ts exits: a usage error is bad input (exit 2, commander's own is 1)
    .exitOverride();
  for (const register of commands) register(program);
  // A usage error prints itself and this one line, not the whole help (68 lines for `motor sim`).
  for (const command of program.commands)
    command.showHelpAfterError(usageHint(`motor ${command.name()}`)).exitOverride();
  return program;
}

const usageHint = (command: string): string => `(see '${command} --help' for usage)`;
