import type { Command } from 'commander';
import { Option } from 'commander';
import { ENGINE_VERSIONS, resolveProfile } from '../simulator/engine-profiles.js';
import { defaultSimOptions, type SimOptions } from '../simulator/options.js';
import { REASONING_PARSERS } from '../simulator/reasoning.js';
import type { FaultConfig } from '../simulator/faults.js';

import { CliError, EXIT_BAD_INPUT, listenError } from './cli-error.js';
import { intArg, numArg } from './number-arg.js';

/** `motor sim`: a vLLM/SGLang-compatible fake engine (docs/simulator.md; flags in docs/cli.md). */
export function registerSim(program: Command): void {
  const d = defaultSimOptions();
  program
    .command('sim')
    .description('run the engine simulator (vLLM/SGLang-compatible fake engine with P/D semantics)')
    .option('--host <host>', 'listen host', d.host)
    .option('--port <port>', 'listen port (0 = any free port)', intArg('--port'), d.port)
    .option(
      '--advertise-host <host>',
      'host put into kv_transfer_params / metaserver bodies (default: listen host)',
    )
    .option('--model <name>', 'served model name', d.model)
    .addOption(
      new Option('--engine <engine>', 'engine to imitate (request ids, /abort_request, bootstrap)')
        .choices(['vllm', 'vllm-ascend', 'sglang'])
        .default(d.engine),
    )
    .option(
      '--engine-version <family>',
      'release family whose wire behaviour is imitated (default: the newest); ' +
        Object.entries(ENGINE_VERSIONS)
          .map(([e, v]) => `${e}: ${v.join('|')}`)
          .join('; '),
    )
    .addOption(
      new Option('--role <role>', 'P/D role').choices(['prefill', 'decode', 'union']).default(d.role),
    )
    .option('--kv-connector <name>', 'vLLM kv_connector name (reported in /debug/info)')
    .option('--engine-id <id>', 'engine id used as remote_engine_id (default: random UUID)')
    .option(
      '--time-scale <x>',
      'multiplies every model delay; 0 = no delays',
      numArg('--time-scale'),
      d.timeScale,
    )
    .option(
      '--prefill-overhead-ms <ms>',
      'fixed TTFT overhead',
      numArg('--prefill-overhead-ms'),
      d.prefillOverheadMs,
    )
    .option(
      '--prefill-ms-per-token <ms>',
      'prefill time per uncached prompt token',
      numArg('--prefill-ms-per-token'),
      d.prefillMsPerToken,
    )
    .option(
      '--itl-ms <ms>',
      'decode step (inter-token latency) with one running sequence',
      numArg('--itl-ms'),
      d.itlMs,
    )
    .option(
      '--load-slowdown <x>',
      'extra decode step time per additional running sequence (fraction)',
      numArg('--load-slowdown'),
      d.loadSlowdown,
    )
    .option(
      '--max-num-seqs <n>',
      'running batch limit; further requests queue FIFO',
      intArg('--max-num-seqs', 1),
      d.maxNumSeqs,
    )
    .option(
      '--max-num-batched-tokens <n>',
      'tokens per engine step (vLLM): one per running decode first, then prefill chunks FCFS',
      intArg('--max-num-batched-tokens', 1),
      d.maxNumBatchedTokens,
    )
    .option(
      '--no-enable-chunked-prefill',
      'turn chunked prefill off (vLLM): a prompt larger than the budget left in a step waits',
    )
    .option(
      '--long-prefill-token-threshold <n>',
      "cap on one request's prefill tokens per step (vLLM); 0 = off",
      intArg('--long-prefill-token-threshold'),
      d.longPrefillTokenThreshold,
    )
    .option(
      '--max-model-len <n>',
      "prompt + max_tokens limit (400 beyond), in the model tokenizer's tokens with --tokenizer",
      intArg('--max-model-len', 1),
      d.maxModelLen,
    )
    .option(
      '--default-max-tokens <n>',
      'output length when the request sets no max_tokens',
      intArg('--default-max-tokens', 1),
      d.defaultMaxTokens,
    )
    .option(
      '--eos-at <n>',
      'the n-th output token of every request is EOS (finish_reason stop; honours min_tokens); 0 = off',
      intArg('--eos-at'),
      d.eosAt,
    )
    .addOption(
      new Option(
        '--reasoning-parser <name>',
        'chat answers begin with reasoning text (vLLM/SGLang --reasoning-parser; qwen3: off per request with chat_template_kwargs.enable_thinking=false)',
      ).choices([...REASONING_PARSERS]),
    )
    .option('--block-size <n>', 'KV block size in tokens', intArg('--block-size', 1), d.blockSize)
    .option('--kv-blocks <n>', 'KV / prefix cache capacity in blocks', intArg('--kv-blocks'), d.kvBlocks)
    .option(
      '--kv-transfer-ms-per-block <ms>',
      'simulated KV transfer time per block',
      numArg('--kv-transfer-ms-per-block'),
      d.kvTransferMsPerBlock,
    )
    .option(
      '--kv-lease-ms <ms>',
      "how long a prefill holds unread handoff blocks (wall clock; default: the profile's, 30000 for " +
        'vllm nixl-newest, else 480000)',
      intArg('--kv-lease-ms', 1),
    )
    .option(
      '--kv-wait-ms <ms>',
      'decode: bound on KV pull / metaserver + push wait (wall clock)',
      intArg('--kv-wait-ms', 1),
      d.kvWaitMs,
    )
    .option(
      '--push-registration-timeout-ms <ms>',
      "vllm nixl-push decode: how long a registration waits for the prefill's write (default: the " +
        "profile's, 480000 = decoder_kv_blocks_ttl)",
      intArg('--push-registration-timeout-ms', 1),
    )
    .option(
      '--bootstrap-timeout-ms <ms>',
      'SGLang: bound on either side waiting for its peer (wall clock)',
      intArg('--bootstrap-timeout-ms', 1),
      d.bootstrapTimeoutMs,
    )
    .option(
      '--bootstrap-port <port>',
      "SGLang: the prefill's bootstrap server port (0 = any free port); what bootstrap_port: null means",
      intArg('--bootstrap-port', 0, 65535),
      d.bootstrapPort,
    )
    .option(
      '--tokenizer <dir>',
      "the model's tokenizer.json + tokenizer_config.json: tokenise chat/completions prompts and hash prefix-cache blocks as vLLM does (KV events then carry vLLM's block hashes)",
    )
    .addOption(
      new Option('--prefix-caching-hash-algo <algo>', "with --tokenizer: vLLM's block hash algorithm")
        .choices(['sha256', 'sha256_cbor'])
        .default(d.prefixCachingHashAlgo),
    )
    .option(
      '--hash-seed <seed>',
      "with --tokenizer: the engine's PYTHONHASHSEED (block hash seed)",
      d.hashSeed,
    )
    .option(
      '--kv-events-endpoint <endpoint>',
      "publish KV cache events in vLLM's format (ZeroMQ PUB bound here, e.g. tcp://127.0.0.1:5557; port * = any free)",
    )
    .option('--kv-events-replay-endpoint <endpoint>', 'KV events replay (ZeroMQ ROUTER) endpoint to bind')
    .option('--kv-events-topic <topic>', 'KV events topic', d.kvEventsTopic)
    .addOption(
      new Option(
        '--kv-events-layout <layout>',
        'event encoding: map (tagged maps, vLLM after PR 42892) or array (array_like, vLLM ≤ 0.23)',
      )
        .choices(['map', 'array'])
        .default(d.kvEventsLayout),
    )
    .option(
      '--kv-events-buffer-steps <n>',
      'KV event batches kept for replay',
      intArg('--kv-events-buffer-steps', 1),
      d.kvEventsBufferSteps,
    )
    .option('--api-key <key>', 'engine API key (vLLM: /v1* routes; SGLang: all but health/ready/metrics)')
    .option('--admin-api-key <key>', 'SGLang admin key: required instead of --api-key on /abort_request')
    .option(
      '--max-body-bytes <n>',
      'request body limit (413 beyond)',
      intArg('--max-body-bytes', 1),
      d.maxBodyBytes,
    )
    .option('--record-max <n>', 'request recorder ring size (0 = off)', intArg('--record-max'), d.recordMax)
    .option('--ledger-max <n>', 'finished requests kept by the ledger', intArg('--ledger-max'), d.ledgerMax)
    .option(
      '--fault-error-rate <p>',
      'fraction of requests failed with --fault-error-status (seeded)',
      numArg('--fault-error-rate'),
    )
    .option('--fault-error-every <n>', 'fail every Nth request', intArg('--fault-error-every'))
    .option('--fault-error-next <n>', 'fail the next N requests', intArg('--fault-error-next'))
    .option('--fault-error-status <code>', '500, 503, 429 or 400', intArg('--fault-error-status'))
    .option('--fault-seed <n>', 'seed of the error-rate PRNG', intArg('--fault-seed'))
    .option(
      '--fault-hang-ms <ms>',
      'hang before the first token (-1 = until the client leaves)',
      intArg('--fault-hang-ms', -1),
    )
    .option(
      '--fault-die-after-tokens <n>',
      'drop the connection after N output tokens',
      intArg('--fault-die-after-tokens'),
    )
    .option(
      '--fault-recompute-after <n>',
      'vllm-ascend decode: end every request after N tokens with stop_reason "recomputed"',
      intArg('--fault-recompute-after'),
    )
    .option('--fault-slow-decode <x>', 'multiply decode step time', numArg('--fault-slow-decode'))
    .option(
      '--fault-refuse-connections <n>',
      'close the next N accepted connections (-1 = all)',
      intArg('--fault-refuse-connections', -1),
    )
    .option(
      '--fault-stream-error-first <n>',
      "the next N decode/single requests fail with the engine's generation error (stream: 200, then an error event)",
      intArg('--fault-stream-error-first'),
    )
    .option(
      '--fault-ignore-remote-kv',
      'P/D decode: recompute the prompt although KV arrived (reports only local cached tokens)',
    )
    .option(
      '--fault-drop-kv-params <keys>',
      'handoff prefill: comma-separated keys left out of kv_transfer_params',
      (v: string) => v.split(',').filter((k) => k.length > 0),
    )
    .option('--fault-match-path <path>', 'only inject faults on this route')
    .addOption(
      new Option('--fault-match-kv <which>', 'only requests with/without P/D fields').choices([
        'any',
        'with',
        'without',
      ]),
    )
    .action(async (o: Record<string, unknown>) => {
      try {
        resolveProfile(o.engine as SimOptions['engine'], (o.engineVersion as string | undefined) ?? null);
      } catch (err) {
        throw new CliError((err as Error).message, EXIT_BAD_INPUT);
      }
      const faults: Partial<FaultConfig> = {};
      const map: Array<[string, keyof FaultConfig]> = [
        ['faultErrorRate', 'error_rate'],
        ['faultErrorEvery', 'error_every'],
        ['faultErrorNext', 'error_next'],
        ['faultErrorStatus', 'error_status'],
        ['faultSeed', 'seed'],
        ['faultHangMs', 'hang_before_first_token_ms'],
        ['faultDieAfterTokens', 'die_after_tokens'],
        ['faultRecomputeAfter', 'recompute_after'],
        ['faultSlowDecode', 'slow_decode_factor'],
        ['faultRefuseConnections', 'refuse_connections'],
        ['faultStreamErrorFirst', 'stream_error_first'],
        ['faultIgnoreRemoteKv', 'ignore_remote_kv'],
        ['faultDropKvParams', 'drop_kv_params'],
        ['faultMatchPath', 'match_path'],
        ['faultMatchKv', 'match_kv'],
      ];
      for (const [flag, key] of map)
        if (o[flag] !== undefined) (faults as Record<string, unknown>)[key] = o[flag];
      const opts: Partial<SimOptions> = {
        host: o.host as string,
        port: o.port as number,
        advertiseHost: (o.advertiseHost as string | undefined) ?? null,
        model: o.model as string,
        engine: o.engine as SimOptions['engine'],
        engineVersion: (o.engineVersion as string | undefined) ?? null,
        role: o.role as SimOptions['role'],
        kvConnector: (o.kvConnector as string | undefined) ?? null,
        engineId: (o.engineId as string | undefined) ?? d.engineId,
        timeScale: o.timeScale as number,
        prefillOverheadMs: o.prefillOverheadMs as number,
        prefillMsPerToken: o.prefillMsPerToken as number,
        itlMs: o.itlMs as number,
        loadSlowdown: o.loadSlowdown as number,
        maxNumSeqs: o.maxNumSeqs as number,
        maxNumBatchedTokens: o.maxNumBatchedTokens as number,
        enableChunkedPrefill: o.enableChunkedPrefill !== false,
        longPrefillTokenThreshold: o.longPrefillTokenThreshold as number,
        maxModelLen: o.maxModelLen as number,
        defaultMaxTokens: o.defaultMaxTokens as number,
        eosAt: o.eosAt as number,
        reasoningParser: (o.reasoningParser as SimOptions['reasoningParser'] | undefined) ?? null,
        blockSize: o.blockSize as number,
        kvBlocks: o.kvBlocks as number,
        kvTransferMsPerBlock: o.kvTransferMsPerBlock as number,
        kvLeaseMs: (o.kvLeaseMs as number | undefined) ?? null,
        kvWaitMs: o.kvWaitMs as number,
        pushRegistrationTimeoutMs: (o.pushRegistrationTimeoutMs as number | undefined) ?? null,
        bootstrapTimeoutMs: o.bootstrapTimeoutMs as number,
        bootstrapPort: o.bootstrapPort as number,
        tokenizer: (o.tokenizer as string | undefined) ?? null,
        prefixCachingHashAlgo: o.prefixCachingHashAlgo as SimOptions['prefixCachingHashAlgo'],
        hashSeed: o.hashSeed as string,
        kvEventsEndpoint: (o.kvEventsEndpoint as string | undefined) ?? null,
        kvEventsReplayEndpoint: (o.kvEventsReplayEndpoint as string | undefined) ?? null,
        kvEventsTopic: o.kvEventsTopic as string,
        kvEventsLayout: o.kvEventsLayout as SimOptions['kvEventsLayout'],
        kvEventsBufferSteps: o.kvEventsBufferSteps as number,
        apiKey: (o.apiKey as string | undefined) ?? null,
        adminApiKey: (o.adminApiKey as string | undefined) ?? null,
        maxBodyBytes: o.maxBodyBytes as number,
        recordMax: o.recordMax as number,
        ledgerMax: o.ledgerMax as number,
        faults,
      };
      // Loaded here, not at the top, so other commands do not pay for the simulator's modules.
      const [{ createLogger }, { onShutdown }, { startSimulator }, { budgetConfigError }] = await Promise.all(
        [
          import('../common/logger.js'),
          import('../common/shutdown.js'),
          import('../simulator/server.js'),
          import('../simulator/step-budget.js'),
        ],
      );
      const budgetError = budgetConfigError({ ...d, ...opts });
      if (budgetError !== null) throw new CliError(budgetError, EXIT_BAD_INPUT);
      const logger = createLogger('motor-sim');
      let sim;
      try {
        sim = await startSimulator(opts, logger);
      } catch (err) {
        const listen = listenError(err);
        if (listen !== undefined) throw listen;
        // the SGLang bootstrap server's failure carries the listen error as its cause
        const bootstrap = listenError((err as Error).cause, '--bootstrap-port');
        if (bootstrap !== undefined) throw bootstrap;
        throw err;
      }
      onShutdown(() => sim.close());
    });
}
