import { HttpError } from '../common/http-error.js';

/** Invalid input (4xx, naming the offending field): the HTTP frame renders it as it is. */
export class RequestError extends HttpError {
  constructor(status: number, message: string, param: string | null = null) {
    super(status, message, { param });
    this.name = 'RequestError';
  }
}
