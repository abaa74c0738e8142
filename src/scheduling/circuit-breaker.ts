import type { Clock } from '../common/clock.js';
import { systemClock } from '../common/clock.js';
import type { RequestOutcome } from './load-tracker.js';

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit (default 5). */
  readonly failureThreshold?: number;
  /** How long an open circuit stays open before probing (default 10 000 ms). */
  readonly openMs?: number;
  /** Probes allowed at once while half-open (default 1). */
  readonly halfOpenMaxProbes?: number;
  /** A probe that never reports back frees its slot after this long (default = openMs). */
  readonly probeTimeoutMs?: number;
  readonly clock?: Clock;
  /** Called on every state change (metrics, one log line). */
  readonly onStateChange?: (instanceId: string, from: CircuitState, to: CircuitState) => void;
}

interface Circuit {
  state: CircuitState;
  consecutiveFailures: number;
  openedAtMs: number;
  /** Start times of probes in flight (half-open only). */
  probes: number[];
}

/**
 * Per-instance circuit breakers (conformance 31): closed → open after N consecutive failures (engine 4xx
 * and cancellations do not count) → half-open after `openMs` with a limited number of probes → closed
 * on a probe success, open again on a probe failure. Only instances with a non-closed circuit or a
 * failure streak hold an entry.
 */
export class CircuitBreakers {
  private readonly failureThreshold: number;
  private readonly openMs: number;
  private readonly halfOpenMaxProbes: number;
  private readonly probeTimeoutMs: number;
  private readonly clock: Clock;
  private readonly onStateChange: CircuitBreakerOptions['onStateChange'];
  private readonly circuits = new Map<string, Circuit>();

  constructor(options: CircuitBreakerOptions = {}) {
    this.failureThreshold = Math.max(1, options.failureThreshold ?? 5);
    this.openMs = options.openMs ?? 10_000;
    this.halfOpenMaxProbes = Math.max(1, options.halfOpenMaxProbes ?? 1);
    this.probeTimeoutMs = options.probeTimeoutMs ?? this.openMs;
    this.clock = options.clock ?? systemClock;
    this.onStateChange = options.onStateChange;
  }

  /** Current state (an open circuit whose timeout passed reads as half-open). */
  state(instanceId: string): CircuitState {
    const circuit = this.circuits.get(instanceId);
    if (!circuit) return 'closed';
    this.refresh(instanceId, circuit);
    return circuit.state;
  }

  /** States of every instance that is not plainly closed (for a metrics gauge). */
  states(): Map<string, CircuitState> {
    const out = new Map<string, CircuitState>();
    for (const [id, circuit] of this.circuits) {
      this.refresh(id, circuit);
      out.set(id, circuit.state);
    }
    return out;
  }

  /** Whether the scheduler may pick this instance now. No side effects besides open → half-open on timeout. */
  isAvailable(instanceId: string): boolean {
    const circuit = this.circuits.get(instanceId);
    if (!circuit) return true;
    this.refresh(instanceId, circuit);
    if (circuit.state === 'closed') return true;
    if (circuit.state === 'open') return false;
    return circuit.probes.length < this.halfOpenMaxProbes;
  }

  /** The scheduler picked this instance: takes a probe slot when half-open. */
  onPicked(instanceId: string): void {
    const circuit = this.circuits.get(instanceId);
    if (!circuit) return;
    this.refresh(instanceId, circuit);
    if (circuit.state === 'half_open') circuit.probes.push(this.clock.now());
  }

  /** Records the outcome of a leg on this instance. */
  record(instanceId: string, outcome: RequestOutcome): void {
    if (outcome === 'client_error') outcome = 'success'; // the instance answered; 4xx is the request's fault
    let circuit = this.circuits.get(instanceId);
    if (outcome === 'cancelled') {
      if (circuit?.state === 'half_open') circuit.probes.shift();
      return;
    }
    if (outcome === 'success') {
      if (!circuit) return;
      const from = circuit.state;
      this.circuits.delete(instanceId);
      if (from !== 'closed') this.onStateChange?.(instanceId, from, 'closed');
      return;
    }
    if (!circuit) {
      circuit = { state: 'closed', consecutiveFailures: 0, openedAtMs: 0, probes: [] };
      this.circuits.set(instanceId, circuit);
    }
    this.refresh(instanceId, circuit);
    circuit.consecutiveFailures += 1;
    if (
      circuit.state === 'half_open' ||
      (circuit.state === 'closed' && circuit.consecutiveFailures >= this.failureThreshold)
    ) {
      this.transition(instanceId, circuit, 'open');
      circuit.openedAtMs = this.clock.now();
      circuit.probes = [];
    }
  }

  /** Drops an instance's state (deregistered). */
  forget(instanceId: string): void {
    this.circuits.delete(instanceId);
  }

  private refresh(instanceId: string, circuit: Circuit): void {
    const now = this.clock.now();
    if (circuit.state === 'open' && now - circuit.openedAtMs >= this.openMs) {
      this.transition(instanceId, circuit, 'half_open');
      circuit.probes = [];
    } else if (circuit.state === 'half_open') {
      while (circuit.probes.length > 0 && now - circuit.probes[0]! >= this.probeTimeoutMs)
        circuit.probes.shift();
    }
  }

  private transition(instanceId: string, circuit: Circuit, to: CircuitState): void {
    const from = circuit.state;
    if (from === to) return;
    circuit.state = to;
    this.onStateChange?.(instanceId, from, to);
  }
}
