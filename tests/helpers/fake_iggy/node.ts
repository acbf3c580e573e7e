/**
 * One node of a fake Iggy cluster, speaking binary protocol 0.11 or 0.12 over TCP (port 0) or
 * an in-memory dial. What it checks on 0.12: the Register version window (eviction 14 with the
 * window otherwise), fresh request ids, the route context (HistoryUnavailable on a stale or zero
 * incarnation), the partition primary (NotPrimary elsewhere), idempotent-producer sequences (a
 * batch sent again is written once). Deferred polls wait for an append; 108 cancels them.
 * Hooks let tests hold replies (to answer out of order), cut a connection after a write, or
 * refuse a request once.
 *
 * @module
 */

import type { FakePartition, FakeStore } from "./store.ts";
import {
  batches,
  eviction,
  type FakeDialect,
  type FakeRequest,
  namedUser,
  ok,
  parseRequest,
  Reader,
  reply,
  rootUser,
  streamRecord,
  topicHeader,
  topicRecord,
  Writer,
} from "./wire.ts";

/** What a hook may ask for a request. */
export type HookAction =
  | undefined
  | { readonly status: number } // refuse with this status (nothing applied)
  | { readonly statusAfterApply: number } // apply, then answer with this status (a broken server)
  | "cut-after-apply" // apply, then drop the connection without replying
  | "hold"; // apply, keep the reply until releaseHeld()

/** Options of a fake node. */
export interface FakeNodeOptions {
  readonly dialect: FakeDialect;
  readonly store: FakeStore;
  readonly replicaId?: number;
  /** Packed version it accepts (default 0.11.0 or 0.12.2). */
  readonly version?: number;
  readonly hook?: (req: FakeRequest, node: FakeNode) => HookAction;
}

interface Conn {
  send(frame: Uint8Array): void;
  close(): void;
  session: bigint;
}

const WINDOW = { "0.11": 0x2c00, "0.12": 0x3002 } as const;

function hex(b: Uint8Array): string {
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** A fake Iggy node. */
export class FakeNode {
  readonly o: FakeNodeOptions;
  readonly seen: FakeRequest[] = [];
  /** Request ids a 0.12 session used twice (must stay empty). */
  readonly reusedIds: bigint[] = [];
  readonly #held: { conn: Conn; frame: Uint8Array }[] = [];
  readonly #conns = new Set<Conn>();
  readonly #sessionIds = new Map<bigint, Set<bigint>>();
  #listener: Deno.Listener | undefined;
  #serving: Promise<void>[] = [];
  down = false;

  constructor(o: FakeNodeOptions) {
    this.o = o;
  }

  get version(): number {
    return this.o.version ?? WINDOW[this.o.dialect];
  }

  /** Listens on 127.0.0.1 (`port` 0: any free one); returns `host:port`. */
  listen(port = 0): string {
    const l = Deno.listen({ hostname: "127.0.0.1", port });
    this.#listener = l;
    const loop = async () => {
      for await (const c of l) {
        this.#serving.push(this.#serve(c.readable, c.writable, () => c.close()));
      }
    };
    this.#serving.push(loop().catch(() => {}));
    return `127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
  }

  /** An in-memory dialer to this node. */
  dial = (): Promise<{
    readable: ReadableStream<Uint8Array>;
    writable: WritableStream<Uint8Array>;
    close(): void;
  }> => {
    if (this.down) return Promise.reject(new Error("connection refused"));
    let toClient!: ReadableStreamDefaultController<Uint8Array>;
    let toServer!: ReadableStreamDefaultController<Uint8Array>;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      for (const c of [toClient, toServer]) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    };
    const clientSide = new ReadableStream<Uint8Array>({ start: (c) => (toClient = c) });
    const serverSide = new ReadableStream<Uint8Array>({ start: (c) => (toServer = c) });
    const fromClient = new WritableStream<Uint8Array>({
      write: (chunk) => {
        if (closed) throw new Error("closed");
        toServer.enqueue(chunk.slice());
      },
    });
    const toClientWritable = new WritableStream<Uint8Array>({
      write: (chunk) => {
        if (!closed) toClient.enqueue(chunk.slice());
      },
    });
    this.#serving.push(this.#serve(serverSide, toClientWritable, close));
    return Promise.resolve({ readable: clientSide, writable: fromClient, close });
  };

  /** Sends every held reply, last first (out of order). */
  releaseHeld(): void {
    for (const h of this.#held.splice(0).reverse()) h.conn.send(h.frame);
  }

  get heldCount(): number {
    return this.#held.length;
  }

  /** Drops every connection (a crash); with `down`, refuses new in-memory dials. */
  dropAll(): void {
    for (const c of [...this.#conns]) c.close();
  }

  async close(): Promise<void> {
    this.dropAll();
    this.#listener?.close();
    await Promise.allSettled(this.#serving);
  }

  async #serve(
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
    close: () => void,
  ): Promise<void> {
    const writer = writable.getWriter();
    let open = true;
    const conn: Conn = {
      send: (f) => {
        if (open) writer.write(f).catch(() => {});
      },
      close: () => {
        open = false;
        this.#conns.delete(conn);
        try {
          close();
        } catch { /* closed */ }
      },
      session: 0n,
    };
    this.#conns.add(conn);
    let buf = new Uint8Array(0);
    try {
      for await (const chunk of readable) {
        const joined = new Uint8Array(buf.length + chunk.length);
        joined.set(buf);
        joined.set(chunk, buf.length);
        buf = joined;
        while (buf.length >= 256) {
          const size = new DataView(buf.buffer, buf.byteOffset).getUint32(48, true);
          if (buf.length < size) break;
          const req = parseRequest(buf.slice(0, size));
          buf = buf.slice(size);
          if (open) this.#handle(conn, req);
        }
      }
    } catch { /* connection dropped */ }
    conn.close();
  }

  #handle(conn: Conn, req: FakeRequest): void {
    this.seen.push(req);
    if (req.operation === 1) return this.#register(conn, req);
    if (this.o.dialect === "0.12" && req.session !== 0n && req.code !== 108) {
      // Ids are per session: connections bound to one session share its counter.
      const ids = this.#sessionIds.get(req.session) ?? new Set<bigint>();
      if (ids.has(req.request)) this.reusedIds.push(req.request);
      ids.add(req.request);
      this.#sessionIds.set(req.session, ids);
    }
    if (req.code === 108) return this.#cancel(conn, req);
    if (req.code === 15 && this.o.dialect === "0.12") return this.#bind(conn, req);
    if (req.code !== 1 && req.session !== conn.session) return; // dropped silently, as Iggy does
    const action = this.o.hook?.(req, this);
    if (action && typeof action === "object" && "status" in action) {
      return conn.send(reply(req, { status: action.status, replica: this.o.replicaId }));
    }
    const respond = (body?: Uint8Array, status = 0) => {
      const f = action && typeof action === "object"
        ? reply(req, { status: action.statusAfterApply, replica: this.o.replicaId })
        : reply(req, { body, status, replica: this.o.replicaId });
      if (action === "cut-after-apply") return conn.close();
      if (action === "hold") return void this.#held.push({ conn, frame: f });
      conn.send(f);
    };
    this.#dispatch(conn, req, respond);
  }

  #register(conn: Conn, req: FakeRequest): void {
    const r = new Reader(req.body);
    const version = r.u32();
    if (version !== this.version && !(this.o.dialect === "0.11" && version >> 10 === 11)) {
      return conn.send(eviction(14, this.version, this.version));
    }
    // A 0.11 server checks a non-zero request_checksum before its gate (IGGY-0.12.md §1).
    r.name();
    r.name();
    const secret = this.o.dialect === "0.12" ? r.bytes(32).slice() : undefined;
    const start = r.pos;
    const username = r.name();
    const password = new TextDecoder().decode(r.bytes(r.u8()));
    const isPassword = r.remaining >= 4 && r.u32() + r.pos === req.body.length;
    r.pos = start;
    const good = isPassword ? this.o.store.users.get(username) === password : true;
    if (!good) return conn.send(eviction(9));
    conn.session = this.o.store.session();
    if (this.o.dialect === "0.12") this.o.store.sessions.set(conn.session, hex(secret!));
    const server = this.o.dialect === "0.12" ? "0.10.0-fake" : "0.9.0-fake";
    const body = new Writer().u32(0).u64(conn.session).u32(this.version).name(server).finish();
    conn.send(reply(req, { body: ok(body), replica: this.o.replicaId }));
  }

  /** BindSession: the session's secret must match; the reply is the Register reply body. */
  #bind(conn: Conn, req: FakeRequest): void {
    const r = new Reader(req.body);
    r.u32();
    r.name();
    r.name();
    r.bytes(16);
    const session = r.u64();
    r.u64();
    const secret = hex(r.bytes(32));
    if (this.o.store.sessions.get(session) !== secret || req.session !== session) {
      return conn.send(eviction(1)); // NoSession
    }
    conn.session = session;
    const body = new Writer().u32(0).u64(session).u32(this.version).name("0.10.0-fake").finish();
    conn.send(reply(req, { body, replica: this.o.replicaId }));
  }

  #dispatch(conn: Conn, req: FakeRequest, respond: (b?: Uint8Array, s?: number) => void): void {
    const store = this.o.store;
    const d = this.o.dialect;
    const r = new Reader(req.body);
    switch (req.code) {
      case 1:
        return respond();
      case 31: {
        const who = r.identifier();
        const grant = store.namedUsers.get(who);
        if (grant !== undefined) {
          return respond(namedUser(d, who, grant, store.stream(grant.stream)?.id ?? 0));
        }
        // By number (a login's own id) or root's name: root; any other name is no user.
        return respond(who.startsWith("#") || who === "iggy" ? rootUser(d) : undefined);
      }
      case 200: {
        const s = store.stream(r.identifier());
        if (!s) return respond();
        const w = new Writer();
        streamRecord(w, s, d);
        for (const t of s.topics.values()) topicHeader(w, t, d);
        return respond(w.finish());
      }
      case 201: {
        const w = new Writer();
        for (const s of store.streams.values()) streamRecord(w, s, d);
        return respond(w.finish());
      }
      case 202: {
        const name = r.name();
        if (store.stream(name)) return respond(new Writer().u32(1).u32(0).u32(1012).finish());
        const w = new Writer();
        streamRecord(w, store.createStream(name), d);
        return respond(ok(w.finish()));
      }
      case 300: {
        const t = store.topic(r.identifier(), r.identifier());
        return respond(t ? topicRecord(t, d) : undefined);
      }
      case 302: {
        const s = store.stream(r.identifier());
        const count = r.u32();
        const name = r.name();
        if (!s) return respond(new Writer().u32(1).u32(0).u32(1009).finish());
        if (s.topics.has(name)) return respond(new Writer().u32(1).u32(0).u32(2013).finish());
        const t = store.createTopic(s, name, count, r.bytes(r.remaining).slice());
        return respond(ok(topicRecord(t, d)));
      }
      case 105:
        return this.#route(r, respond);
      case 101:
        return this.#send(req, r, respond);
      case 100:
      case 106:
        return this.#poll(conn, req, r, respond);
      case 120:
      case 121:
      case 122:
        return this.#offset(req, r, respond);
      default:
        return respond(undefined, 3);
    }
  }

  /** The partition a routed request names, or the refusal status. */
  #partition(req: FakeRequest, s: string, t: string, id: number): FakePartition | number {
    const p = this.o.store.partition(s, t, id);
    if (!p) return this.o.store.topic(s, t) ? 3007 : 2010;
    if (this.o.dialect === "0.11") return p;
    if (req.incarnation !== p.incarnation) return 87;
    if (p.primary !== (this.o.replicaId ?? 0)) return 89;
    return p;
  }

  #route(r: Reader, respond: (b?: Uint8Array, s?: number) => void): void {
    const t = this.o.store.topic(r.identifier(), r.identifier());
    const p = t?.partitions[r.u32()];
    if (!t || !p) return respond(undefined, 3007);
    const w = new Writer().u64(p.incarnation).u64(this.o.store.metadataOp).u32(0);
    respond(w.u32(t.partitions.length).u8(p.primary).finish());
  }

  #send(req: FakeRequest, r: Reader, respond: (b?: Uint8Array, s?: number) => void): void {
    r.u32();
    const s = r.identifier();
    const t = r.identifier();
    r.u8();
    r.u8();
    const partition = r.u32();
    r.u32();
    const p = this.#partition(req, s, t, partition);
    if (typeof p === "number") return respond(undefined, p);
    const batch = r.bytes(r.remaining);
    const bv = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
    const count = bv.getUint32(48, true);
    const origin = Number(bv.getBigUint64(24, true));
    let dup: number | undefined;
    let producer: { id: bigint; seq: number } | undefined;
    if (batch[52] === 1) {
      producer = { id: bv.getBigUint64(56, true), seq: bv.getUint32(68, true) };
      const state = p.producers.get(producer.id);
      dup = state?.batches.get(producer.seq);
      const expected = state?.next ?? 0;
      if (dup === undefined && producer.seq !== expected) {
        return respond(undefined, state ? 92 : 94);
      }
    }
    let base = dup;
    if (base === undefined) {
      const frames = [];
      let at = 256;
      for (let i = 0; i < count; i++) {
        const len = 48 + bv.getUint32(at + 32, true) + bv.getUint32(at + 36, true);
        const delta = bv.getUint32(at + 28, true);
        frames.push({ frame: batch.slice(at, at + len), originMicros: origin + delta });
        at += len;
      }
      base = this.o.store.append(p, frames);
      if (producer) {
        const state = p.producers.get(producer.id) ?? { epoch: 0, next: 0, batches: new Map() };
        state.batches.set(producer.seq, base);
        state.next = producer.seq + count;
        p.producers.set(producer.id, state);
      }
    }
    const sid = this.o.store.stream(s)!.id;
    respond(new Writer().u32(1).u32(sid).u32(1).u32(partition).u64(base).finish());
  }

  #poll(
    conn: Conn,
    req: FakeRequest,
    r: Reader,
    respond: (b?: Uint8Array, s?: number) => void,
  ): void {
    r.u8();
    r.identifier();
    const s = r.identifier();
    const t = r.identifier();
    r.u8();
    const partition = r.u32();
    r.u8();
    const from = Number(r.u64());
    const count = r.u32();
    r.u8();
    const waitUs = req.code === 106 ? Number(r.u64()) : 0;
    const p = this.#partition(req, s, t, partition);
    if (typeof p === "number") return respond(undefined, p);
    const answer = () => {
      const messages = p.messages.slice(from, from + count);
      const w = new Writer().u32(partition).u64(Math.max(0, p.messages.length - 1));
      w.u32(messages.length);
      if (this.o.dialect === "0.12") w.u64(p.incarnation).u64(0).u64(this.o.store.metadataOp);
      batches(w, messages, partition);
      respond(w.finish());
    };
    if (p.messages.length > from || waitUs === 0) return answer();
    const waiter = {
      from,
      key: `${conn.session}:${req.request}`,
      wake: () => {
        clearTimeout(timer);
        p.waiters.delete(waiter);
        this.#waiting.delete(waiter.key);
        answer();
      },
    };
    const timer = setTimeout(waiter.wake, waitUs / 1000);
    p.waiters.add(waiter);
    this.#waiting.set(waiter.key, { p, waiter, timer });
  }

  readonly #waiting = new Map<
    string,
    { p: FakePartition; waiter: { wake(): void }; timer: ReturnType<typeof setTimeout> }
  >();

  /** Deferred polls waiting now. */
  get waitingPolls(): number {
    return this.#waiting.size;
  }

  #cancel(conn: Conn, req: FakeRequest): void {
    const key = `${conn.session}:${req.request}`;
    const w = this.#waiting.get(key);
    if (!w) return;
    clearTimeout(w.timer);
    w.p.waiters.delete(w.waiter as never);
    this.#waiting.delete(key);
  }

  #offset(req: FakeRequest, r: Reader, respond: (b?: Uint8Array, s?: number) => void): void {
    r.u8();
    const consumer = r.identifier();
    const s = r.identifier();
    const t = r.identifier();
    r.u8();
    const partition = r.u32();
    const p = this.#partition(req, s, t, partition);
    if (typeof p === "number") return respond(undefined, p);
    const key = `${consumer}/${s}/${t}/${partition}`;
    if (req.code === 121) {
      this.o.store.offsets.set(key, Number(r.u64()));
      return respond(ok());
    }
    if (req.code === 122) { // Iggy: ConsumerOffsetNotFound when none is stored
      return this.o.store.offsets.delete(key) ? respond(ok()) : respond(undefined, 3021);
    }
    const stored = this.o.store.offsets.get(key);
    if (stored === undefined) return respond();
    respond(new Writer().u32(partition).u64(p.messages.length).u64(stored).finish());
  }
}
