import type { CoordinatorConfig } from '../../config/coordinator-config.js';
import { DOCTOR_PATH } from '../doctor/doctor-route.js';

/**
 * The 404 text for `GET /v1/doctor` on the client port: `motor doctor --coordinator` pointed at the
 * gateway instead of the management API gets told where the report lives, not a bare "no route".
 */
export function doctorHint(management: CoordinatorConfig['management']): string {
  const here = `this is the client port; the doctor report is GET ${DOCTOR_PATH} on the management API`;
  if (management.port === null)
    return `${here}, which is off: set management.port, then run motor doctor --coordinator http://<management.host>:<management.port>`;
  if (management.port === 0)
    return `${here} (management.port 0: the port the coordinator logged as listening, server management)`;
  return `${here}: motor doctor --coordinator http://${management.host}:${management.port}`;
}
