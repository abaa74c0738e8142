import { definePlugin } from '../plugin.js';
import { createAffinityScorer, prefixAffinityParams } from '../prefix-affinity.js';

/**
 * Precise prefix-cache affinity (issue 17): the `prefix-affinity` cost, with each instance's cached
 * tokens taken from what its engine's KV events say it holds (the request's `kvPrediction`: the
 * prompt's vLLM block hashes looked up in the KV block index, plus the blocks of this coordinator's
 * requests routed there whose events have not arrived yet). An instance without an event stream,
 * or a request whose block hashes cannot be computed (no `kvHash` group, a prompt the tokenizer cannot
 * reproduce), falls back to the routed-history estimate, which it keeps up to date either way.
 */
export const precisePrefixScorer = definePlugin({
  type: 'precise-prefix',
  kind: 'scorer',
  description:
    "prefix-affinity with each instance's cached tokens read from its engine's KV events (`kvEvents` + `kvHash`); " +
    'falls back to the routed-history estimate where no events or block hashes are known',
  params: prefixAffinityParams,
  create: (params, services) => createAffinityScorer(params, services, true),
});
