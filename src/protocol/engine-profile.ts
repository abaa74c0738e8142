import { explainVllmDispatchProfile, type ProfileExplanation } from './classification.js';
import { configGet, isPlainRecord, normalized } from './python-values.js';

export const ENGINE_KINDS = ['vllm', 'sglang'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/**
 * Profile of one engine from its config file. Accepts the vLLM engine config itself
 * (`kv_transfer_config`, `dispatch_profile`) or the seed's endpoint-config shape
 * (`engine_type` + `deploy_config.engine_config`). SGLang engines coordinate through bootstrap rooms.
 * Throws `DispatchProfileError` for an invalid explicit profile.
 */
export function explainEngineProfile(
  config: unknown,
  engine?: EngineKind,
  explicitProfile?: string,
): ProfileExplanation & { engine: EngineKind } {
  const endpointForm = isPlainRecord(config) && ('deploy_config' in config || 'engine_type' in config);
  const kind = engine ?? (normalized(configGet(config, 'engine_type')) === 'sglang' ? 'sglang' : 'vllm');
  if (kind === 'sglang') {
    return {
      engine: kind,
      profile: 'bootstrap',
      decidedBy: 'engine',
      reason: 'SGLang engines rendezvous by bootstrap room',
    };
  }
  if (!endpointForm) return { engine: kind, ...explainVllmDispatchProfile(config, explicitProfile) };
  const deploy = configGet(config, 'deploy_config');
  const deployProfile = configGet(deploy, 'dispatch_profile');
  const explanation = explainVllmDispatchProfile(
    configGet(deploy, 'engine_config'),
    explicitProfile || deployProfile,
  );
  const fromArgument = explanation.decidedBy.startsWith('explicit');
  const decidedBy = !fromArgument
    ? `deploy_config.engine_config.${explanation.decidedBy}`
    : explicitProfile
      ? explanation.decidedBy
      : 'deploy_config.dispatch_profile';
  return { engine: kind, ...explanation, decidedBy };
}
