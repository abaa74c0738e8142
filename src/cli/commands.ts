import type { Command } from 'commander';
import { registerBench } from './bench.js';
import { registerClassify } from './classify.js';
import { registerCoordinator } from './coordinator.js';
import { registerDoctor } from './doctor.js';
import { registerEngineProxy } from './engine-proxy.js';
import { registerSim } from './sim.js';
import { registerUp } from './up.js';
import { registerVerify } from './verify.js';

/** Every CLI command registers itself on the root program; this list is the only wiring point. */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [
  registerUp,
  registerClassify,
  registerSim,
  registerCoordinator,
  registerEngineProxy,
  registerBench,
  registerDoctor,
  registerVerify,
];
