/**
 * State of a fake Iggy cluster, shared by its nodes: streams, topics, partitions with their
 * messages, consumer offsets, idempotent-producer state, the partition primaries, and the
 * deferred polls waiting for an append. Written from IGGY.md / IGGY-0.12.md for tests; it is a
 * test double, not proof of compatibility (the golden vectors and the real 0.9 server are).
 *
 * @module
 */

/** One stored message (a frame as the client sent it, offset assigned). */
export interface FakeMessage {
  readonly offset: number;
  readonly timestampMicros: number;
  readonly originMicros: number;
  /** The 48-byte frame header + payload + user headers, as sent. */
  readonly frame: Uint8Array;
  /** `performance.now()` when appended (latency measurements). */
  readonly appendedAt: number;
}

/** A waiting deferred poll. */
export interface Waiter {
  readonly from: number;
  wake(): void;
}

/** A partition of the fake. */
export interface FakePartition {
  readonly id: number;
  incarnation: bigint;
  messages: FakeMessage[];
  /** producer id → {next sequence, base sequence → base offset of the batches written}. */
  producers: Map<bigint, { epoch: number; next: number; batches: Map<number, number> }>;
  waiters: Set<Waiter>;
  /** Replica id of the primary. */
  primary: number;
}

/** A topic of the fake. */
export interface FakeTopic {
  readonly id: number;
  readonly name: string;
  readonly options: Uint8Array;
  readonly partitions: FakePartition[];
}

/** A stream of the fake. */
export interface FakeStream {
  readonly id: number;
  readonly name: string;
  readonly topics: Map<string, FakeTopic>;
}

/** An Iggy user other than root, with rights on one stream (GET_USER by name answers it). */
export interface FakeUserGrant {
  readonly id: number;
  readonly stream: string;
  readonly send: boolean;
  readonly poll: boolean;
  /** Status 2 (inactive) instead of 1. */
  readonly inactive?: boolean;
}

/** What the cluster holds. */
export class FakeStore {
  readonly streams = new Map<string, FakeStream>();
  readonly offsets = new Map<string, number>();
  readonly users = new Map<string, string>([["iggy", "iggy"]]);
  /** Users GET_USER finds by name, besides root; an unknown name gets an empty reply. */
  readonly namedUsers = new Map<string, FakeUserGrant>();
  metadataOp = 1n;
  /** Bind secrets of the live sessions (hex), for BindSession. */
  readonly sessions = new Map<bigint, string>();
  #nextSession = 100n;
  #nextStreamId = 1;
  #nextIncarnation = 7n;

  /** A fresh session number (the commit op of a Register). */
  session(): bigint {
    return this.#nextSession++;
  }

  stream(name: string): FakeStream | undefined {
    return this.streams.get(name);
  }

  topic(stream: string, topic: string): FakeTopic | undefined {
    return this.streams.get(stream)?.topics.get(topic);
  }

  partition(stream: string, topic: string, id: number): FakePartition | undefined {
    return this.topic(stream, topic)?.partitions[id];
  }

  createStream(name: string): FakeStream {
    const s = { id: this.#nextStreamId++, name, topics: new Map<string, FakeTopic>() };
    this.streams.set(name, s);
    this.metadataOp++;
    return s;
  }

  createTopic(stream: FakeStream, name: string, count: number, options: Uint8Array): FakeTopic {
    const partitions = Array.from({ length: count }, (_, id) => this.#newPartition(id, 0));
    const t = { id: stream.topics.size + 1, name, options, partitions };
    stream.topics.set(name, t);
    this.metadataOp++;
    return t;
  }

  #newPartition(id: number, primary: number): FakePartition {
    return {
      id,
      incarnation: this.#nextIncarnation++,
      messages: [],
      producers: new Map(),
      waiters: new Set(),
      primary,
    };
  }

  /** Deletes and recreates a partition (a new incarnation: old routes get HistoryUnavailable). */
  recreatePartition(stream: string, topic: string, id: number): void {
    const t = this.topic(stream, topic)!;
    t.partitions[id] = this.#newPartition(id, t.partitions[id].primary);
    this.metadataOp++;
  }

  /** Moves a partition's primary to another node. */
  movePrimary(stream: string, topic: string, id: number, primary: number): void {
    this.partition(stream, topic, id)!.primary = primary;
    this.metadataOp++;
  }

  /** Appends frames; wakes the partition's deferred polls. Returns the first offset. */
  append(p: FakePartition, frames: { frame: Uint8Array; originMicros: number }[]): number {
    const base = p.messages.length;
    const now = Date.now() * 1000;
    const at = performance.now();
    frames.forEach((f, i) =>
      p.messages.push({
        offset: base + i,
        timestampMicros: now,
        originMicros: f.originMicros,
        frame: f.frame,
        appendedAt: at,
      })
    );
    for (const w of [...p.waiters]) w.wake();
    return base;
  }

  /** Appends one message from outside the gateway (another producer), with string headers. */
  appendExternal(
    stream: string,
    topic: string,
    id: number,
    payload: Uint8Array,
    headers: ReadonlyMap<string, string> = new Map(),
  ): number {
    const tlv: number[] = [];
    const put = (text: string) => {
      const b = new TextEncoder().encode(text);
      tlv.push(2, b.length & 0xff, (b.length >> 8) & 0xff, 0, 0, ...b);
    };
    for (const [k, v] of headers) {
      put(k);
      put(v);
    }
    const frame = new Uint8Array(48 + payload.length + tlv.length);
    const v = new DataView(frame.buffer);
    v.setBigUint64(8, BigInt(Date.now()), true); // some id
    v.setUint32(32, tlv.length, true);
    v.setUint32(36, payload.length, true);
    frame.set(payload, 48);
    frame.set(tlv, 48 + payload.length);
    return this.append(this.partition(stream, topic, id)!, [{
      frame,
      originMicros: Date.now() * 1000,
    }]);
  }

  /** Every stored payload of a partition as text. */
  payloads(stream: string, topic: string, id: number): string[] {
    const p = this.partition(stream, topic, id);
    if (!p) return [];
    return p.messages.map((m) => {
      const v = new DataView(m.frame.buffer, m.frame.byteOffset);
      return new TextDecoder().decode(m.frame.subarray(48, 48 + v.getUint32(36, true)));
    });
  }
}
