/**
 * `motor-pd/testing`: prefill/decode engine simulators (vLLM, vllm-ascend, SGLang wire behaviour) for
 * testing your own stack against P/D engines without GPUs (docs/library.md, docs/simulator.md).
 */
import { createLogger, type Logger } from './common/logger.js';
import type { FaultConfig } from './simulator/faults.js';
import type { SimEngine, SimOptions, SimRole } from './simulator/options.js';
import { startSimulator as startSimulatorServer } from './simulator/server.js';

export type { FaultConfig, SimEngine, SimRole };

/** Any `motor sim` setting (docs/cli.md "motor sim"), camelCased; unset ones take `motor sim`'s defaults. */
export interface SimulatorOptions extends Partial<SimOptions> {
  /** A pino logger (default: pino on stdout at `MOTOR_LOG_LEVEL`, else `warn`, named `motor-sim`). */
  logger?: Logger;
}

export interface Simulator {
  /** Base URL, e.g. `http://127.0.0.1:39123` (loopback and a free port unless `host` / `port` say otherwise). */
  url: string;
  /** SGLang prefill: its bootstrap server's port; null otherwise. */
  bootstrapPort: number | null;
  /** Closes the listener(s) and every open connection. */
  close(): Promise<void>;
}

/** Starts one simulated engine, e.g. `await startSimulator({ role: 'prefill', engine: 'vllm', timeScale: 0 })`. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const { logger, ...settings } = options;
  const log = logger ?? createLogger('motor-sim', process.env.MOTOR_LOG_LEVEL ?? 'warn');
  const sim = await startSimulatorServer(settings, log);
  return { url: sim.url, bootstrapPort: sim.bootstrapPort, close: () => sim.close() };
}
