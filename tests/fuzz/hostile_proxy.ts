/**
 * A hostile Iggy: a loopback TCP proxy in front of a fake Iggy node that passes requests on
 * unchanged and corrupts a fraction of the reply frames on their way back, in either dialect
 * (both share the 256-byte framing): bytes of the body flipped or a length field set to 4 GB
 * (the size field kept right), header fields changed (status, frame kind, request id), a frame
 * dropped, sent twice, replaced by an eviction, preceded by garbage, its size field broken, or
 * the connection cut. The fraction can be set to 0 at any time (a calm phase: the gateway must
 * recover). What it does is drawn from its seed, in the order frames come (timing decides which
 * frame that is, so a process-level round is seeded, not replayable byte for byte).
 *
 * @module
 */
import { concatBytes } from "../../src/base/bytes.ts";
import { int, mutate, pick, type Rand, randomBytes, rng } from "./random.ts";

const HEADER = 256;
const SIZE_AT = 48;
const KIND_AT = 60;
const REQUEST_AT = 200;
const STATUS_AT = 216;
const EVICTION_REASON_AT = 255;

/** The kinds of corruption, by name (the counts of a round). */
export const CORRUPTIONS = [
  "body",
  "header",
  "status",
  "kind",
  "request",
  "drop",
  "duplicate",
  "eviction",
  "garbage",
  "size",
  "cut",
] as const;
export type Corruption = typeof CORRUPTIONS[number];

/** A running hostile proxy. */
export interface HostileProxy {
  /** `127.0.0.1:port` to give the gateway as the Iggy address. */
  readonly address: string;
  /** Fraction of reply frames corrupted (0: a plain proxy). */
  rate: number;
  /** Reply frames passed on, corrupted or not. */
  readonly frames: number;
  /** Corruptions applied, by kind. */
  readonly corrupted: Readonly<Record<string, number>>;
  /** Cuts every open connection now. */
  cutAll(): void;
  close(): Promise<void>;
}

/** Little-endian u32 at `at`. */
function u32(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(at, true);
}

/** A reply frame with its header's size field set to its length. */
function sized(header: Uint8Array, body: Uint8Array): Uint8Array {
  const f = concatBytes([header, body]);
  new DataView(f.buffer, f.byteOffset).setUint32(SIZE_AT, f.length, true);
  return f;
}

/** What to write instead of `frame` (possibly nothing), or "cut". */
function corrupt(r: Rand, frame: Uint8Array, kind: Corruption): Uint8Array | "cut" {
  const header = frame.slice(0, HEADER);
  const body = frame.subarray(HEADER);
  const hv = new DataView(header.buffer);
  switch (kind) {
    case "body":
      return sized(
        header,
        body.length === 0 ? randomBytes(r, int(r, 40)) : mutate(r, body, [body]),
      );
    case "header": {
      const out = mutate(r, header, [header]).slice(0, HEADER);
      const h = new Uint8Array(HEADER);
      h.set(out);
      return sized(h, body);
    }
    case "status":
      hv.setUint32(STATUS_AT, pick(r, [1, 3, 41, 57, 58, 87, 89, 2010, 3007, 0xffff_ffff]), true);
      return sized(header, int(r, 2) ? body : new Uint8Array(0));
    case "kind":
      header[KIND_AT] = pick(r, [0, 5, 9, 13, 255]);
      return sized(header, body);
    case "request":
      hv.setBigUint64(REQUEST_AT, BigInt(int(r, 2 ** 31)), true);
      return sized(header, body);
    case "drop":
      return new Uint8Array(0);
    case "duplicate":
      return concatBytes([frame, frame]);
    case "eviction": {
      const e = new Uint8Array(HEADER);
      new DataView(e.buffer).setUint32(SIZE_AT, HEADER, true);
      e[KIND_AT] = 13;
      e[EVICTION_REASON_AT] = int(r, 20);
      return e;
    }
    case "garbage":
      return concatBytes([randomBytes(r, 1 + int(r, 300)), frame]);
    case "size":
      hv.setUint32(
        SIZE_AT,
        pick(r, [0, 255, 0xffff_ffff, 64 * 1024 * 1024 + 257, frame.length + 1]),
        true,
      );
      return concatBytes([header, body]);
    default:
      return "cut";
  }
}

/** Starts a hostile proxy to `target` (`host:port`). */
export function startHostileProxy(target: string, seed: number, rate = 0): HostileProxy {
  const [hostname, port] = [
    target.slice(0, target.lastIndexOf(":")),
    Number(target.slice(target.lastIndexOf(":") + 1)),
  ];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const r = rng(seed);
  const open = new Set<() => void>();
  const running: Promise<void>[] = [];
  const corrupted: Record<string, number> = {};
  const state = { rate, frames: 0 };

  async function pump(client: Deno.TcpConn): Promise<void> {
    let server: Deno.TcpConn;
    try {
      server = await Deno.connect({ hostname, port });
    } catch {
      client.close();
      return;
    }
    let closed = false;
    const cut = () => {
      if (closed) return;
      closed = true;
      open.delete(cut);
      for (const c of [client, server]) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    };
    open.add(cut);
    const up = client.readable.pipeTo(server.writable, { preventClose: true }).catch(() => {});
    const down = (async () => {
      let buf: Uint8Array = new Uint8Array(0);
      const writer = client.writable.getWriter();
      try {
        for await (const chunk of server.readable) {
          buf = buf.length === 0 ? chunk : concatBytes([buf, chunk]);
          while (buf.length >= HEADER && buf.length >= u32(buf, SIZE_AT)) {
            const size = Math.max(HEADER, u32(buf, SIZE_AT));
            const frame = buf.slice(0, size);
            buf = buf.subarray(size);
            state.frames++;
            let out: Uint8Array | "cut" = frame;
            if (state.rate > 0 && r() < state.rate) {
              const kind = pick(r, CORRUPTIONS);
              corrupted[kind] = (corrupted[kind] ?? 0) + 1;
              out = corrupt(r, frame, kind);
            }
            if (out === "cut") return;
            if (out.length > 0) await writer.write(out);
          }
        }
      } catch {
        /* either side went away */
      } finally {
        writer.releaseLock();
      }
    })();
    await down;
    cut();
    await up;
  }

  const accepting = (async () => {
    for await (const c of listener) running.push(pump(c));
  })().catch(() => {});

  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    get rate() {
      return state.rate;
    },
    set rate(v: number) {
      state.rate = v;
    },
    get frames() {
      return state.frames;
    },
    corrupted,
    cutAll() {
      for (const cut of [...open]) cut();
    },
    async close() {
      listener.close();
      for (const cut of [...open]) cut();
      await accepting;
      await Promise.allSettled(running);
    },
  };
}
