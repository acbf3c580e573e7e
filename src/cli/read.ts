/**
 * The `read` command: stored messages of the embedded store, opened read-only beside a running
 * gateway. What the operator can get wrong (no store yet, a topic or partition that does not
 * exist, the iggy backend) ends in one-line errors.
 *
 * @module
 */
import { ConfigError, OperatorError } from "../config/errors.ts";
import { fileAccessError, fileExists } from "../config/files.ts";
import type { GatewayConfig } from "../config/types.ts";
import { EmbeddedBackend } from "../log/embedded/mod.ts";
import type { LogBackend, PartitionAddress } from "../log/port.ts";
import { logIn } from "./iggy_login.ts";
import { formatRead, formatRetained } from "./read_format.ts";
import { filterMatches } from "../mapping/filter.ts";
import { messageOf } from "../stored/retained/retained_set.ts";
import { Logger } from "../observe/logger.ts";
import { retainedOptionsOf, RetainedStore } from "../stored/retained/retained_store.ts";

/** What to read; `partition` null means every partition of the topic. */
export interface ReadRequest {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number | null;
  readonly from: number;
  /** At most this many messages per partition. */
  readonly count: number;
  readonly json: boolean;
}

/** Messages per poll: bounds memory whatever --count asks for. */
const PAGE = 1000;

/**
 * Prints the requested messages through `print`, one line each: from the embedded store, or with
 * `upstream` from the Iggy of `[iggy]` (forward mode's upstream, Iggy mode's server), logged in
 * as the gateway logs in.
 */
export async function readMessages(
  config: GatewayConfig,
  r: ReadRequest,
  print: (line: string) => void,
  upstream = false,
): Promise<void> {
  const backend: LogBackend = upstream ? await openUpstream(config) : await openStore(config);
  const path = upstream ? `Iggy at ${config.iggy.address}` : `"${config.embedded.path}"`;
  try {
    const info = await backend.getTopic(r.stream, r.topic);
    if (info === null) {
      throw new OperatorError(
        "not_found",
        `read: no topic "${r.topic}" in stream "${r.stream}" in ${path}`,
      );
    }
    if (r.partition !== null && r.partition >= info.partitions) {
      throw new OperatorError(
        "out_of_range",
        `read: partition ${r.partition} does not exist; topic ${r.stream}/${r.topic} has ${
          info.partitions === 1 ? "only partition 0" : `partitions 0-${info.partitions - 1}`
        }`,
      );
    }
    const partitions = r.partition !== null
      ? [r.partition]
      : Array.from({ length: info.partitions }, (_, i) => i);
    for (const partition of partitions) {
      await printPartition(backend, { stream: r.stream, topic: r.topic, partition }, r, print);
    }
  } finally {
    await backend.close();
  }
}

/**
 * Prints the retained set (`read --retained`), topics in order, only those `filter` matches
 * when given; nothing when no message was ever retained.
 */
export async function readRetained(
  config: GatewayConfig,
  filter: string | undefined,
  json: boolean,
  print: (line: string) => void,
): Promise<void> {
  const backend = await openStore(config);
  try {
    const r = config.retained;
    if (await backend.getTopic(r.stream, r.topic) === null) return;
    const quiet = new Logger("error", () => {});
    const store = new RetainedStore(backend, retainedOptionsOf(config, "embedded"), quiet);
    if (!(await store.load())) {
      throw new OperatorError(
        "invalid_file",
        `read: the retained topic ${r.stream}/${r.topic} in "${config.embedded.path}" could not be read`,
      );
    }
    const entries = [...store.set.entries()]
      .filter((e) => filter === undefined || filterMatches(filter, e.topic))
      .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
    for (const e of entries) print(formatRetained(messageOf(e), json));
  } finally {
    await backend.close();
  }
}

/** The Iggy of `[iggy]`, when the config uses one (forward mode, Iggy mode). */
async function openUpstream(config: GatewayConfig): Promise<LogBackend> {
  if (config.gateway.backend !== "iggy" && !config.forward.enabled) {
    throw new ConfigError(
      "forward.enabled",
      "read --upstream reads the Iggy of [iggy]: the config has none (forward.enabled is false and gateway.backend is embedded)",
    );
  }
  return await logIn(config);
}

/** The embedded store of `config`, opened read-only (works while the gateway runs). */
export async function openStore(config: GatewayConfig): Promise<EmbeddedBackend> {
  if (config.gateway.backend !== "embedded") {
    throw new ConfigError(
      "gateway.backend",
      "read works on the embedded store; use Iggy's own tools for iggy",
    );
  }
  const path = config.embedded.path;
  if (!(await fileExists(path))) {
    throw new OperatorError(
      "not_found",
      `read: no embedded store at "${path}" (embedded.path); the gateway creates it on its first run`,
    );
  }
  const backend = new EmbeddedBackend({
    path,
    users: [],
    maxStoreBytes: config.embedded.max_store_bytes,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 86_400_000,
    maxAppendBatch: 1,
    readOnly: true,
    writerThread: config.embedded.writer_thread,
  });
  try {
    await backend.open();
  } catch (err) {
    throw fileAccessError(err, "read", "embedded store", path) ?? err;
  }
  return backend;
}

/** Up to `r.count` messages of one partition from `r.from`, in pages. */
async function printPartition(
  backend: LogBackend,
  address: PartitionAddress,
  r: ReadRequest,
  print: (line: string) => void,
): Promise<void> {
  let next = r.from;
  for (let left = r.count; left > 0;) {
    const page = await backend.poll(address, next, Math.min(left, PAGE));
    if (page.length === 0) break;
    for (const m of page) print(formatRead(m, r.json));
    left -= page.length;
    next = page[page.length - 1].offset + 1;
  }
}
