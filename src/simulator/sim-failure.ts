/** A failure of the simulated engine (not of the input): rendered as an HTTP error or an SSE error frame. */
export class SimFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}
