/**
 * Byte helpers of the fake Iggy: request-header fields, body readers, reply frames and the
 * metadata records in either dialect (IGGY.md §4.6 for 0.11, IGGY-0.12.md §5 for 0.12).
 *
 * @module
 */

import type { FakeMessage, FakeStream, FakeTopic } from "./store.ts";

/** Dialects a fake node speaks. */
export type FakeDialect = "0.11" | "0.12";

/** A request as a fake node reads it. */
export interface FakeRequest {
  readonly client: bigint;
  readonly requestChecksum: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly session: bigint;
  readonly code: number;
  readonly incarnation: bigint;
  readonly metadataOp: bigint;
  readonly body: Uint8Array;
}

/** Reads the header fields of a request frame. */
export function parseRequest(frame: Uint8Array): FakeRequest {
  const v = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const u128 = (at: number) => v.getBigUint64(at, true) | (v.getBigUint64(at + 8, true) << 64n);
  const operation = frame[176];
  return {
    client: u128(128),
    requestChecksum: u128(144),
    request: v.getBigUint64(168, true),
    operation,
    session: v.getBigUint64(184, true),
    code: operation === 2 ? v.getUint32(196, true) : codeOfOperation(operation, frame),
    incarnation: v.getBigUint64(200, true),
    metadataOp: v.getBigUint64(216, true),
    body: frame.slice(256),
  };
}

function codeOfOperation(op: number, frame: Uint8Array): number {
  switch (op) {
    case 1:
      // Register: password (40) or token (45) is told apart by the body; see node.ts.
      return frame.length > 0 ? 40 : 40;
    case 3:
      return 39;
    case 128:
      return 202;
    case 132:
      return 302;
    case 160:
      return 101;
    case 161:
      return 121;
    case 162:
      return 122;
    default:
      return -op;
  }
}

/** A cursor over a request body. */
export class Reader {
  #v: DataView;
  pos = 0;
  constructor(readonly b: Uint8Array) {
    this.#v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  u8(): number {
    return this.b[this.pos++];
  }
  u32(): number {
    const x = this.#v.getUint32(this.pos, true);
    this.pos += 4;
    return x;
  }
  u64(): bigint {
    const x = this.#v.getBigUint64(this.pos, true);
    this.pos += 8;
    return x;
  }
  bytes(n: number): Uint8Array {
    const x = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return x;
  }
  name(): string {
    return new TextDecoder().decode(this.bytes(this.u8()));
  }
  /** `[kind][len][value]`: a string name or a numeric id (as its decimal text). */
  identifier(): string {
    const kind = this.u8();
    const len = this.u8();
    const value = this.bytes(len);
    if (kind === 1) return `#${new DataView(value.buffer, value.byteOffset).getUint32(0, true)}`;
    return new TextDecoder().decode(value);
  }
  get remaining(): number {
    return this.b.length - this.pos;
  }
}

/** A little-endian writer. */
export class Writer {
  #parts: number[] = [];
  u8(x: number): this {
    this.#parts.push(x & 0xff);
    return this;
  }
  u32(x: number): this {
    for (let i = 0; i < 4; i++) this.#parts.push((x >>> (8 * i)) & 0xff);
    return this;
  }
  u64(x: bigint | number): this {
    const b = BigInt(x);
    for (let i = 0n; i < 8n; i++) this.#parts.push(Number((b >> (8n * i)) & 0xffn));
    return this;
  }
  bytes(b: Uint8Array): this {
    for (const x of b) this.#parts.push(x);
    return this;
  }
  name(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.u8(b.length).bytes(b);
  }
  finish(): Uint8Array {
    return Uint8Array.from(this.#parts);
  }
}

/** A reply frame for `req`. */
export function reply(
  req: { request: bigint; operation: number },
  o: { status?: number; body?: Uint8Array; replica?: number } = {},
): Uint8Array {
  const body = o.body ?? new Uint8Array(0);
  const f = new Uint8Array(256 + body.length);
  const v = new DataView(f.buffer);
  v.setUint32(48, f.length, true);
  f[60] = 8;
  f[61] = o.replica ?? 0;
  v.setBigUint64(200, req.request, true);
  f[208] = req.operation;
  v.setUint32(216, o.status ?? 0, true);
  f.set(body, 256);
  return f;
}

/** An eviction frame. */
export function eviction(reason: number, max = 0, min = 0): Uint8Array {
  const f = new Uint8Array(256);
  const v = new DataView(f.buffer);
  v.setUint32(48, 256, true);
  f[60] = 13;
  v.setUint32(144, max, true);
  v.setUint32(148, min, true);
  f[255] = reason;
  return f;
}

/** `[count=0]` + payload: a successful result section. */
export function ok(payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  return new Writer().u32(0).bytes(payload).finish();
}

function options(w: Writer, opts: Uint8Array): void {
  w.u32(opts.length).bytes(opts);
}

/** A stream record. */
export function streamRecord(w: Writer, s: FakeStream, d: FakeDialect): void {
  w.u32(s.id).u64(1).u32(s.topics.size).u64(0).u64(0).name(s.name).u32(0);
  if (d === "0.12") w.u32(0);
}

/** A topic header. */
export function topicHeader(w: Writer, t: FakeTopic, d: FakeDialect): void {
  const messages = t.partitions.reduce((n, p) => n + p.messages.length, 0);
  w.u32(t.id).u64(1).u32(t.partitions.length);
  if (d === "0.11") w.u64(0).u8(1).u64(0);
  w.u64(0).u64(messages).name(t.name);
  options(w, t.options);
  w.u32(0); // derived options
}

/** A topic with its partitions. */
export function topicRecord(t: FakeTopic, d: FakeDialect): Uint8Array {
  const w = new Writer();
  topicHeader(w, t, d);
  for (const p of t.partitions) {
    const n = p.messages.length;
    w.u32(p.id).u64(1).u32(1).u64(n === 0 ? 0 : n - 1).u64(0).u64(n);
    if (d === "0.12") w.u64(p.incarnation).u64(0).u64(1).u8(1).u8(p.primary).u8(0);
  }
  return w.finish();
}

/** A root user without a permissions block. */
export function rootUser(d: FakeDialect): Uint8Array {
  const w = new Writer().u32(0).u64(1).u8(1).name("iggy").u32(0);
  if (d === "0.12") w.u32(0);
  return w.finish();
}

/**
 * A GET_USER reply for a user with stream rights: the user record, then its permissions (no
 * global rights; on `streamId`: poll and send as granted, nothing on topics).
 */
export function namedUser(
  d: FakeDialect,
  name: string,
  g: { id: number; send: boolean; poll: boolean; inactive?: boolean },
  streamId: number,
): Uint8Array {
  const perms = new Writer();
  for (let i = 0; i < 10; i++) perms.u8(0); // global flags
  perms.u8(1).u32(streamId);
  for (const flag of [false, true, false, true, g.poll, g.send]) perms.u8(flag ? 1 : 0);
  perms.u8(0).u8(0); // no topics, no next stream
  const p = perms.finish();
  const w = new Writer().u32(g.id).u64(1).u8(g.inactive ? 2 : 1).name(name).u32(0);
  if (d === "0.12") w.u32(0);
  return w.u8(1).u32(p.length).bytes(p).finish();
}

/** Batches of a poll reply: one batch per message (offset_delta 0). */
export function batches(w: Writer, messages: readonly FakeMessage[], partition: number): void {
  for (const m of messages) {
    const header = new Uint8Array(256);
    const v = new DataView(header.buffer);
    v.setBigUint64(0, BigInt(partition), true);
    v.setBigUint64(8, BigInt(m.offset), true);
    v.setBigUint64(16, BigInt(m.timestampMicros), true);
    v.setBigUint64(24, BigInt(m.originMicros), true);
    v.setBigUint64(32, BigInt(256 + m.frame.length), true);
    v.setUint32(48, 1, true);
    const frame = m.frame.slice();
    const fv = new DataView(frame.buffer);
    fv.setUint32(24, 0, true); // offset_delta
    fv.setUint32(28, 0, true); // timestamp_delta
    w.bytes(header).bytes(frame);
  }
}
