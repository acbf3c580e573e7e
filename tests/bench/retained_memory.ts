/**
 * Memory of a loaded retained set, for the bench's "retained" scenario: opens the embedded store
 * at the given path read-only, reads its retained set as the gateway does, and prints (one JSON
 * line) the heap and array-buffer bytes it holds per retained message, payload included.
 * Run with --v8-flags=--expose-gc: a collection before each reading leaves only what is held.
 *
 * @module
 */
import { openStoreReadOnly } from "../helpers/store.ts";
import { RetainedStore } from "../../src/stored/retained/retained_store.ts";
import { Logger } from "../../src/observe/logger.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
const path = Deno.args[0];
const backend = await openStoreReadOnly(path);
const held = () => {
  gc();
  const m = Deno.memoryUsage();
  return m.heapUsed + m.external;
};
const store = new RetainedStore(backend, {
  stream: "mqtt_gateway",
  topic: "retained",
  pollIntervalMs: 0,
  maxMessages: 10_000_000,
  maxBytes: 2 ** 40,
  maxMessageBytes: 1 << 20,
}, new Logger("error", () => {}));
// A first load warms the code and the backend's caches; the second is what the figure counts.
await store.load();
store.set.clear();
const before = held();
await store.load();
const after = held();
const n = store.set.size;
console.log(JSON.stringify({ messages: n, bytesPerMessage: n > 0 ? (after - before) / n : 0 }));
await backend.close();
