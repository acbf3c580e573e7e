/**
 * The forwarder's settings, from `[forward]` with some of `[iggy]` and `[log]`.
 *
 * @module
 */

/** Settings of the forwarder (`[forward]`, with `[iggy]` and `[log]` ones). */
export interface ForwarderOptions {
  readonly gatewayId: string;
  readonly batchMaxMessages: number;
  readonly batchMaxBytes: number;
  readonly lingerMs: number;
  /** Longest wait between two attempts after failures (ms). */
  readonly retryMaxMs: number;
  /** Upstream topics the forwarder creates confirm sends only once on disk. */
  readonly durableTopics: boolean;
  /** Where the upstream is, in words (status and logs). */
  readonly upstreamName: string;
}
