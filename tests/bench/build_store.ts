/**
 * Builds an embedded store of about `--bytes` of messages, as the gateway writes them (the
 * embedded backend's own append path, the mapping's default stream and topic), for the
 * benchmark's "store" scenario: how much RSS opening a large store adds.
 *
 *   deno run -A tests/bench/build_store.ts --path=data/big/gateway.db --bytes=1073741824
 *
 * Messages are the bench's (100-byte payloads with the headers a PUBLISH gets), appended
 * 1,000 to a batch over 4 partitions, several batches in flight, so 1 GiB takes seconds, not
 * minutes. `--messages=N` stops at N messages instead (the forward scenario's backlog). Prints
 * one JSON line: bytes on disk, messages, seconds.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import type { OutgoingMessage } from "../../src/log/port.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: {
    path: { type: "string" },
    bytes: { type: "string", default: String(1024 ** 3) },
    /** Stops at this many messages instead (0 = by bytes). */
    messages: { type: "string", default: "0" },
    stream: { type: "string", default: "sensors" },
    topic: { type: "string", default: "messages_default" },
    partitions: { type: "string", default: "4" },
  },
});
if (!a.path) throw new Error("--path is required");
const target = Number(a.bytes);
const targetMessages = Number(a.messages);
const partitions = Number(a.partitions);

const backend = new EmbeddedBackend({
  path: a.path,
  users: [],
  maxStoreBytes: Math.max(target * 2, 64 * 1024 * 1024),
  retentionMaxAgeSeconds: 0,
  retentionMaxTopicBytes: 0,
  retentionIntervalMs: 3_600_000,
  maxAppendBatch: 1000,
  writerThread: "in-process",
});
await backend.open();
const t0 = performance.now();
const info = await backend.getTopic(a.stream!, a.topic!) ??
  await backend.createTopic(a.stream!, a.topic!, { partitions });
const payload = new Uint8Array(100).fill(0x61);
const message = (i: number): OutgoingMessage => ({
  payload,
  headers: new Map([
    ["mqtt.topic", "bench/ingest1"],
    ["mqtt.qos", "1"],
    ["mqtt.client_id", `bench-q1-${i % 10}`],
    ["mqtt.packet_id", String(1 + (i % 65535))],
  ]),
});
const batch = Array.from({ length: 1000 }, (_, i) => message(i));
let messages = 0;
let p = 0;
const inFlight = new Set<Promise<unknown>>();
const logBytes = () => {
  let n = 0;
  for (const e of Deno.readDirSync(`${a.path}-log`)) {
    if (e.isFile) n += Deno.statSync(`${a.path}-log/${e.name}`).size;
  }
  return n;
};
// Segment files are preallocated (they run ahead of the records by at most one segment).
let onDisk = 0;
while (targetMessages > 0 ? messages < targetMessages : onDisk < target) {
  const pr = backend.append({
    stream: a.stream!,
    topic: a.topic!,
    partition: p++ % info.partitions,
    messages: batch,
  });
  inFlight.add(pr);
  pr.finally(() => inFlight.delete(pr));
  messages += batch.length;
  if (inFlight.size >= 8) await Promise.race(inFlight);
  if (p % 64 === 0) onDisk = logBytes();
}
await Promise.all(inFlight);
await backend.close();
console.log(JSON.stringify({
  path: a.path,
  messages,
  segmentBytes: logBytes(),
  seconds: (performance.now() - t0) / 1000,
}));
