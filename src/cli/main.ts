import { readFileSync } from 'node:fs';
import { expectedError, usageExitCode } from './cli-error.js';
import { createProgram } from './program.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const program = createProgram(pkg.version);
let command = '';
program.hook('preAction', (_root, action) => {
  command = action.name();
});
try {
  await program.parseAsync(process.argv);
} catch (err) {
  const usage = usageExitCode(err);
  if (usage !== undefined) {
    process.exitCode = usage; // commander printed the error and its hint
  } else {
    const expected = expectedError(err);
    if (expected === undefined) throw err;
    console.error(`motor ${command}: ${expected.message}`);
    process.exitCode = expected.exitCode;
  }
}
