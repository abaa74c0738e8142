import {
  DispatchProfileError,
  explainEngineProfile,
  type DispatchProfile,
  type EngineKind,
} from '../protocol/index.js';

/** What an instance's config says of its engine: the dispatch profile and the KV connector. */
export interface InstanceProfile {
  profile: DispatchProfile;
  /** The transport connector as classification decides (pairs form within one); absent = unknown. */
  kvConnector?: string;
}

/**
 * Classifies an instance's `kvTransferConfig` / `dispatchProfile` as `motor classify` does. An invalid
 * explicit profile is one line in `issues` (for `instances[index]`) and reads as `unknown`.
 */
export function instanceProfile(
  inst: { kvTransferConfig?: Record<string, unknown> | undefined; dispatchProfile?: string | undefined },
  engine: EngineKind,
  index: number,
  issues: string[],
): InstanceProfile {
  try {
    const config = inst.kvTransferConfig ? { kv_transfer_config: inst.kvTransferConfig } : {};
    const { profile, kvConnector } = explainEngineProfile(config, engine, inst.dispatchProfile);
    return kvConnector === undefined ? { profile } : { profile, kvConnector };
  } catch (err) {
    if (!(err instanceof DispatchProfileError)) throw err;
    issues.push(`instances[${index}].dispatchProfile: ${err.message}`);
    return { profile: 'unknown' };
  }
}
