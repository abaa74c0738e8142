import { sendJson } from '../../common/http.js';
import type { RouteHandler } from '../../common/http-frame.js';
import type { Doctor } from './doctor.js';

/** Where the management API serves `motor doctor`'s report. */
export const DOCTOR_PATH = '/v1/doctor';

/**
 * `GET /v1/doctor` on the management port (operator-only: it sends probe requests to the engines and
 * shows the fleet's configuration): the {@link Doctor} report as JSON, 200 whatever the verdicts
 * (`drift: true` says a check failed). One run at a time: concurrent calls share it.
 */
export function doctorRoute(doctor: Doctor): RouteHandler {
  let running: ReturnType<Doctor['run']> | null = null;
  return async (_req, res) => {
    running ??= doctor.run().finally(() => {
      running = null;
    });
    sendJson(res, 200, await running, { 'cache-control': 'no-store' });
  };
}
