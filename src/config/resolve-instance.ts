import {
  dispatchCapabilitiesForProfile,
  dispatchPlansFromCapabilities,
  type DispatchPlan,
  type EngineKind,
} from '../protocol/index.js';
import type { InstanceConfig, ResolvedInstance } from './coordinator-config.js';
import * as engineKeys from './engine-credentials.js';
import { instanceProfile } from './instance-profile.js';
import { unknownKvTransferKeys } from '../protocol/kv-transfer-fields.js';

/** What resolving the static instances collects: keys by id, issues (errors) and warnings. */
export interface InstanceResolution {
  env: NodeJS.ProcessEnv;
  engineCredentials: Map<string, engineKeys.EngineCredentials>;
  issues: string[];
  warnings: string[];
  /** Ids seen so far (duplicates are an issue). */
  seen: Set<string>;
}

/** One static instance, validated by the schema, with its id, engine, profile and capabilities resolved. */
export function resolveInstance(
  entry: InstanceConfig,
  index: number,
  into: InstanceResolution,
): ResolvedInstance {
  const path = `instances[${index}]`;
  const id = entry.id ?? `${entry.role}-${index}`;
  const inst = engineKeys.takeEngineCredentials(entry, id, path, into);
  const engine: EngineKind = inst.engine ?? 'vllm';
  if (into.seen.has(id)) into.issues.push(`${path}.id: duplicate id '${id}'`);
  into.seen.add(id);
  if (inst.kvTransferConfig !== undefined)
    into.warnings.push(...unknownKvTransferKeys(inst.kvTransferConfig, `${path}.kvTransferConfig`));
  const { profile: classified, ...kv } = instanceProfile(inst, engine, index, into.issues);
  let profile = classified;
  let capabilities: DispatchPlan[];
  if (inst.dispatchCapabilities !== undefined) {
    capabilities = [...dispatchPlansFromCapabilities(inst.dispatchCapabilities)];
    if (profile === 'unknown' && capabilities.includes('concurrent_engine_sync')) {
      profile = engine === 'sglang' ? 'bootstrap' : 'trigger';
    }
    if (profile === 'unknown' && capabilities.includes('prefill_handoff_decode')) profile = 'handoff';
  } else {
    capabilities = dispatchCapabilitiesForProfile(profile) as DispatchPlan[];
  }
  const named = [inst.dispatchProfile, inst.kvTransferConfig, inst.dispatchCapabilities].some(Boolean);
  const configured = { engine: inst.engine !== undefined, capabilities: named || engine === 'sglang' };
  return { ...inst, id, engine, index, dispatchCapabilities: capabilities, profile, configured, ...kv };
}
