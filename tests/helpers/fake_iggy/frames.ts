/**
 * The fake Iggy at the frame level (the unit tests of one connection, pool and reply): an
 * in-memory "server" over a transport pair, to check what the client writes and how it
 * handles replies, evictions and silence. `node.ts` is the same fake at the level of a server
 * on a socket. Not proof of compatibility — `tests/contract/iggy_test.ts` against a real server
 * is.
 *
 * @module
 */

import { FrameKind } from "../../../src/log/iggy/codes.ts";
import type { Dialer, Transport } from "../../../src/log/iggy/dial.ts";
import {
  EvictionOffset,
  HEADER_SIZE,
  ReplyOffset,
  RequestOffset,
} from "../../../src/log/iggy/header_layout.ts";

/** A request as the fake server saw it. */
export interface SeenRequest {
  readonly client: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly session: bigint;
  readonly code: number;
  readonly body: Uint8Array;
}

/** What the handler answers: frames to send back (none = stay silent). */
export type Handler = (req: SeenRequest) => Uint8Array[];

/** Builds a reply frame. */
export function replyFrame(
  o: { operation: number; request?: bigint; status?: number; body?: Uint8Array },
): Uint8Array {
  const body = o.body ?? new Uint8Array(0);
  const f = new Uint8Array(HEADER_SIZE + body.length);
  const v = new DataView(f.buffer);
  v.setUint32(ReplyOffset.SIZE, f.length, true);
  f[ReplyOffset.COMMAND] = FrameKind.REPLY;
  v.setBigUint64(ReplyOffset.REQUEST, o.request ?? 0n, true);
  f[ReplyOffset.OPERATION] = o.operation;
  v.setUint32(ReplyOffset.STATUS, o.status ?? 0, true);
  f.set(body, HEADER_SIZE);
  return f;
}

/** Builds an eviction frame. */
export function evictionFrame(reason: number, serverVersion = 0x2c00, min = 0x2c00): Uint8Array {
  const f = new Uint8Array(HEADER_SIZE);
  const v = new DataView(f.buffer);
  v.setUint32(ReplyOffset.SIZE, HEADER_SIZE, true);
  f[ReplyOffset.COMMAND] = FrameKind.EVICTION;
  v.setUint32(EvictionOffset.SERVER_VERSION, serverVersion, true);
  v.setUint32(EvictionOffset.SERVER_VERSION_MIN, min, true);
  f[EvictionOffset.REASON] = reason;
  return f;
}

/** Result-framed success body: `[count=0][payload]`. */
export function resultOk(payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(4 + payload.length);
  out.set(payload, 4);
  return out;
}

/** Register reply payload. */
export function registerPayload(userId: number, session: bigint): Uint8Array {
  const name = new TextEncoder().encode("0.9.0");
  const b = new Uint8Array(17 + name.length);
  const v = new DataView(b.buffer);
  v.setUint32(0, userId, true);
  v.setBigUint64(4, session, true);
  v.setUint32(12, 0x2c00, true);
  b[16] = name.length;
  b.set(name, 17);
  return b;
}

function parse(frame: Uint8Array): SeenRequest {
  const v = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  return {
    client: v.getBigUint64(RequestOffset.CLIENT, true) |
      (v.getBigUint64(RequestOffset.CLIENT + 8, true) << 64n),
    request: v.getBigUint64(RequestOffset.REQUEST, true),
    operation: frame[RequestOffset.OPERATION],
    session: v.getBigUint64(RequestOffset.SESSION, true),
    code: v.getUint32(RequestOffset.CODE, true),
    body: frame.slice(HEADER_SIZE),
  };
}

/**
 * A reply built without a request id gets the request's, as Iggy echoes it; one built with an
 * id of its own (a test of a reply to another request) keeps it.
 */
function echoRequest(f: Uint8Array, req: SeenRequest): Uint8Array {
  if (f.length < HEADER_SIZE || f[ReplyOffset.COMMAND] !== FrameKind.REPLY) return f;
  const v = new DataView(f.buffer, f.byteOffset, f.byteLength);
  if (v.getBigUint64(ReplyOffset.REQUEST, true) === 0n) {
    v.setBigUint64(ReplyOffset.REQUEST, req.request, true);
  }
  return f;
}

/** A fake server: every dial gets a fresh in-memory connection served by `handler`. */
export class FakeServer {
  readonly seen: SeenRequest[] = [];
  readonly #handler: Handler;
  readonly #open = new Set<Transport>();
  dials = 0;

  constructor(handler: Handler) {
    this.#handler = handler;
  }

  /** A dialer connecting to this server. */
  readonly dial: Dialer = () => {
    this.dials++;
    let toClient!: ReadableStreamDefaultController<Uint8Array>;
    let closed = false;
    let pending = new Uint8Array(0);
    const readable = new ReadableStream<Uint8Array>({ start: (c) => (toClient = c) });
    const writable = new WritableStream<Uint8Array>({
      write: (chunk) => {
        if (closed) throw new Error("closed");
        const joined = new Uint8Array(pending.length + chunk.length);
        joined.set(pending);
        joined.set(chunk, pending.length);
        pending = joined;
        while (pending.length >= HEADER_SIZE) {
          const size = new DataView(pending.buffer, pending.byteOffset).getUint32(48, true);
          if (pending.length < size) break;
          const req = parse(pending.slice(0, size));
          pending = pending.slice(size);
          this.seen.push(req);
          for (const f of this.#handler(req)) if (!closed) toClient.enqueue(echoRequest(f, req));
        }
      },
    });
    const t: Transport = {
      readable,
      writable,
      close: () => {
        if (closed) return;
        closed = true;
        this.#open.delete(t);
        try {
          toClient.close();
        } catch { /* already closed */ }
      },
    };
    this.#open.add(t);
    return Promise.resolve(t);
  };

  /** Drops every open connection, as a server restart would. */
  dropAll(): void {
    for (const t of [...this.#open]) t.close();
  }
}
