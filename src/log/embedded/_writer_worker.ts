/**
 * Worker entry of the catalog's writer (_writer.ts). The first request opens the catalog; every
 * later one is answered in order of arrival, one at a time (they are synchronous).
 *
 * Loaded by `new Worker(new URL("./_writer_worker.ts", import.meta.url))` from
 * _writer_link.ts, a form `deno compile` follows from main.ts's module graph.
 *
 * @module
 */
import { toWireError, Writer, type WriterReply, type WriterRequest } from "./_writer.ts";

interface WorkerScope {
  onmessage: ((event: MessageEvent<WriterRequest>) => void) | null;
  postMessage(message: WriterReply): void;
  close(): void;
}

const scope = self as unknown as WorkerScope;
let writer: Writer | undefined;
const KNOWN = new Set(["offsets", "createTopic", "floors", "close"]);

scope.onmessage = (event) => {
  const request = event.data;
  if (!writer) {
    if (request.type !== "open") {
      throw new Error(`Writer request "${request.type}" before "open"`);
    }
    try {
      writer = new Writer(request.path, request.maxStoreBytes);
      scope.postMessage({ id: request.id, ok: true, value: null });
    } catch (e) {
      scope.postMessage({ id: request.id, ok: false, error: toWireError(e) });
    }
    return;
  }
  if (!KNOWN.has(request.type)) {
    // A request this worker does not know is a bug on the other side: fail loudly. The error
    // reaches the backend's `onerror`, which rejects every pending call with "unavailable".
    throw new Error(`Unknown writer request "${request.type}"`);
  }
  writer.handle(request).then((reply) => scope.postMessage(reply));
};

// The hello the link waits for: every module of the worker loaded (see _writer_link.ts).
scope.postMessage({ id: 0, ok: true, value: "loaded" });
