import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

export type MotorProcess = MotorChild;

/** Starts `motor <args>` as a real process and resolves once it logs `listening` (see spawnMotor). */
export function startMotor(args: string[], opts: { timeoutMs?: number } = {}): Promise<MotorProcess> {
  return spawnMotor(args, { timeoutMs: opts.timeoutMs });
}
