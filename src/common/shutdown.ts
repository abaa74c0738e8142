/** Runs `close` once on SIGINT/SIGTERM (given the signal), then exits; a second signal exits at once. */
export function onShutdown(close: (signal: NodeJS.Signals) => Promise<unknown>): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (closing) process.exit(130);
    closing = true;
    close(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(`shutdown after ${signal} failed:`, err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
