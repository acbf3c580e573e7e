/**
 * A plain Iggy client for tests that look at Iggy directly (not through the gateway): our
 * backend with one connection and short timeouts.
 *
 * @module
 */
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import type { LogBackend, StoredMessage } from "../../src/log/port.ts";

/** An unopened client of the Iggy server at `address`. */
export function iggyClient(address: string, username: string, password: string): IggyBackend {
  return new IggyBackend({
    address,
    protocol: "auto",
    username,
    password,
    token: "",
    tls: false,
    tls_ca_file: "",
    tls_server_name: "",
    request_timeout_ms: 5000,
    pool_size: 1,
    heartbeat_interval_ms: 5000,
    reconnect_max_ms: 1000,
    batch_max_messages: 100,
    batch_max_bytes: 1 << 20,
    batch_linger_ms: 0,
    metadata_refresh_ms: 5000,
  }, { patUsername: "__pat__", cacheTtlMs: 0 });
}

/**
 * Every message of `stream`/`topic` per partition, in offset order, read through `iggy` (any
 * open backend): what tests compare with what devices were acknowledged.
 */
export async function readTopic(
  iggy: LogBackend,
  stream: string,
  topic: string,
): Promise<StoredMessage[][]> {
  const info = await iggy.getTopic(stream, topic);
  const out: StoredMessage[][] = [];
  for (let p = 0; p < (info?.partitions ?? 0); p++) {
    const got: StoredMessage[] = [];
    for (let from = 0;;) {
      const msgs = await iggy.poll({ stream, topic, partition: p }, from, 1000);
      if (msgs.length === 0) break;
      got.push(...msgs);
      from = msgs[msgs.length - 1].offset + 1;
    }
    out.push(got);
  }
  return out;
}
