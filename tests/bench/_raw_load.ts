/**
 * The ingest scenarios (QoS 0 and QoS 1) over {@link RawSocket}: one synchronous epoll loop for
 * all connections, pre-encoded PUBLISH packets patched in place, every refill of a connection
 * in one `write`, PUBACKs counted by scanning the read buffer (no object per packet). The loop
 * blocks the event loop by design: this process does nothing else while it measures.
 *
 * @module
 */
import { encodePublish, PINGREQ, repeat } from "./_mqtt.ts";
import { connectRaw } from "./_raw_client.ts";
import { EPOLLIN, EPOLLOUT, Poller, RawSocket } from "./_raw_socket.ts";
import { Histogram } from "./_stats.ts";

/** What every ingest scenario is given. */
export interface IngestOptions {
  readonly port: number;
  readonly conns: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly maxMsgs: number;
  readonly payload: Uint8Array;
  /** Starts the CPU window; its result is called at the end of the measured window. */
  readonly cpuWindow: () => () => Record<string, number>;
}

/**
 * Scans `buf[0..end)` for complete packets, calling `onPuback(id)` per PUBACK and
 * `onOther(first)` per other packet; returns how many bytes were consumed.
 */
function scanPackets(
  buf: Uint8Array,
  end: number,
  onPuback: (id: number) => void,
  onOther: (first: number) => void,
): number {
  let pos = 0;
  while (end - pos >= 2) {
    const first = buf[pos];
    // The server sends PUBACK (0x40 0x02 id id) and PINGRESP (0xd0 0x00): one length byte.
    let len = buf[pos + 1];
    let i = pos + 2;
    if (len & 0x80) {
      len &= 0x7f;
      let mul = 128;
      for (;; i++, mul *= 128) {
        if (i >= end || i > pos + 4) return pos;
        len += (buf[i] & 0x7f) * mul;
        if ((buf[i] & 0x80) === 0) break;
      }
      i++;
    }
    if (end - i < len) break;
    if (first === 0x40 && len >= 2) onPuback((buf[i] << 8) | buf[i + 1]);
    else onOther(first);
    pos = i + len;
  }
  return pos;
}

/** One read into `buf[end..)`; the new end, or -1 when the peer closed. */
function readInto(s: RawSocket, buf: Uint8Array, end: number): number {
  const n = s.readSome(buf, end);
  return n < 0 ? -1 : end + n;
}

/** PINGREQ on every socket, then waits for every PINGRESP (all sent before is processed). */
function barrier(socks: RawSocket[], poller: Poller, timeoutMs = 30_000): void {
  const pending = new Set<number>();
  for (let i = 0; i < socks.length; i++) {
    socks[i].writeAllBlocking(PINGREQ);
    pending.add(i);
    poller.modify(socks[i], i, EPOLLIN);
  }
  const buf = new Uint8Array(64 * 1024);
  const ends = new Int32Array(socks.length);
  const deadline = performance.now() + timeoutMs;
  while (pending.size > 0) {
    if (performance.now() > deadline) throw new Error("No PINGRESP within the barrier's bound");
    const n = poller.wait(50);
    for (let k = 0; k < n; k++) {
      const i = poller.readyIndex[k];
      const end = readInto(socks[i], buf, ends[i]);
      if (end < 0) throw new Error("Connection closed by the server during the barrier");
      const used = scanPackets(buf, end, () => {}, (first) => {
        if (first === 0xd0) pending.delete(i);
      });
      buf.copyWithin(0, used, end);
      ends[i] = end - used;
    }
  }
}

/**
 * QoS 0 ingest: each socket is written a pre-encoded chunk of 512 PUBLISHes whenever it is
 * writable; a barrier ends the warm-up and the measured window, so every counted message was
 * processed by the server inside the window.
 */
export function qos0Raw(o: IngestOptions) {
  const chunkMsgs = 512;
  const pkt = encodePublish("bench/ingest0", o.payload, 0).bytes;
  const chunk = repeat(pkt, chunkMsgs);
  const socks = Array.from({ length: o.conns }, (_, i) => connectRaw(o.port, `bench-q0-${i}`));
  const poller = new Poller();
  socks.forEach((s, i) => poller.add(s, i, EPOLLOUT));
  const offset = new Int32Array(o.conns);
  let sent = 0;
  const phase = (until: number) => {
    for (let i = 0; i < o.conns; i++) poller.modify(socks[i], i, EPOLLOUT);
    let finished = 0;
    const done = new Uint8Array(o.conns);
    const finish = (i: number) => {
      done[i] = 1;
      finished++;
      poller.modify(socks[i], i, 0);
    };
    while (finished < o.conns) {
      const n = poller.wait(5);
      if (performance.now() >= until || sent >= o.maxMsgs) {
        // Stopping: a socket at a chunk boundary is done; the others finish their chunk, so
        // only whole packets precede the barrier's PINGREQ.
        for (let i = 0; i < o.conns; i++) if (!done[i] && offset[i] === 0) finish(i);
      }
      for (let k = 0; k < n; k++) {
        const i = poller.readyIndex[k];
        if (done[i]) continue;
        const before = offset[i];
        const w = socks[i].write(chunk, before);
        if (w < 0) throw new Error("Connection closed by the server during QoS 0 ingest");
        offset[i] = (before + w) % chunk.length;
        sent += Math.floor((before + w) / pkt.length) - Math.floor(before / pkt.length);
      }
    }
    barrier(socks, poller);
  };
  phase(performance.now() + o.warmupMs);
  sent = 0;
  const t0 = performance.now();
  const cpu = o.cpuWindow();
  phase(t0 + o.durationMs);
  const ms = performance.now() - t0;
  const c = cpu();
  socks.forEach((s) => s.close());
  poller.close();
  return { msgs: sent, elapsedMs: ms, msgsPerSec: sent / (ms / 1000), io: "libc-epoll", ...c };
}

/** One QoS 1 publisher of {@link qos1Raw}: its window, packet ids and pending bytes. */
interface Q1Conn {
  readonly sock: RawSocket;
  /** `inflight` copies of the PUBLISH, ids patched per refill, written from `[0, n·len)`. */
  readonly out: Uint8Array;
  readonly sendAt: Float64Array;
  readonly inBuf: Uint8Array;
  inEnd: number;
  nextId: number;
  /** PUBACKs received and not yet refilled. */
  refill: number;
  /** A refill the socket has not taken whole yet: `out[pendFrom, pendTo)`. */
  pendFrom: number;
  pendTo: number;
}

/**
 * QoS 1 ingest: each connection keeps `inflight` PUBLISHes outstanding. After each wake, every
 * connection that got PUBACKs is refilled with one write of that many PUBLISHes (ids patched
 * into the pre-encoded copies); wakes are coalesced by `coalesceUs` (see
 * {@link Poller.waitCoalesced}). PUBACK latency runs from the refill's write to the wake that
 * read its PUBACK, so it includes that coalescing, as any client's would.
 */
export function qos1Raw(
  o: IngestOptions & { readonly inflight: number; readonly coalesceUs: number },
) {
  const tpl = encodePublish("bench/ingest1", o.payload, 1, 1);
  const len = tpl.bytes.length;
  const hist = new Histogram();
  const poller = new Poller();
  const conns: Q1Conn[] = Array.from({ length: o.conns }, (_, i) => {
    const sock = connectRaw(o.port, `bench-q1-${i}`);
    poller.add(sock, i, EPOLLIN);
    return {
      sock,
      out: repeat(tpl.bytes, o.inflight),
      sendAt: new Float64Array(65536),
      inBuf: new Uint8Array(64 * 1024),
      inEnd: 0,
      nextId: 1,
      refill: o.inflight,
      pendFrom: 0,
      pendTo: 0,
    };
  });
  let measuring = false;
  let stopped = false;
  let acked = 0;
  let outstanding = 0;
  let now = performance.now();
  let cur: Q1Conn = conns[0];
  const onPuback = (id: number) => {
    outstanding--;
    if (measuring) {
      hist.recordMs(now - cur.sendAt[id]);
      acked++;
    }
    if (!stopped) cur.refill++;
  };
  const ignore = () => {};
  const send = (c: Q1Conn, i: number) => {
    if (c.pendTo > c.pendFrom) {
      const w = c.sock.write(c.out, c.pendFrom, c.pendTo);
      if (w < 0) throw new Error("Connection closed by the server during QoS 1 ingest");
      c.pendFrom += w;
      if (c.pendFrom < c.pendTo) return;
      poller.modify(c.sock, i, EPOLLIN);
    }
    const n = c.refill;
    if (n === 0) return;
    c.refill = 0;
    for (let k = 0; k < n; k++) {
      const id = c.nextId;
      c.nextId = id === 65535 ? 1 : id + 1;
      c.out[k * len + tpl.idAt] = id >> 8;
      c.out[k * len + tpl.idAt + 1] = id & 0xff;
      c.sendAt[id] = now;
    }
    outstanding += n;
    const w = c.sock.write(c.out, 0, n * len);
    if (w < 0) throw new Error("Connection closed by the server during QoS 1 ingest");
    if (w < n * len) {
      c.pendFrom = w;
      c.pendTo = n * len;
      poller.modify(c.sock, i, EPOLLIN | EPOLLOUT);
    }
  };
  const t0 = performance.now();
  const measureAt = t0 + o.warmupMs;
  const stopAt = measureAt + o.durationMs;
  let tm = 0;
  let cpu: (() => Record<string, number>) | null = null;
  let c: Record<string, number> = {};
  let drainUntil = Infinity;
  conns.forEach(send);
  while (now < drainUntil && !(stopped && outstanding === 0)) {
    const n = poller.waitCoalesced(o.coalesceUs, 1);
    now = performance.now();
    if (!measuring && !stopped && now >= measureAt) {
      measuring = true;
      tm = now;
      cpu = o.cpuWindow();
    }
    if (measuring && (now >= stopAt || acked >= o.maxMsgs)) {
      measuring = false;
      stopped = true;
      tm = now - tm;
      c = cpu!();
      drainUntil = now + 5000;
    }
    for (let k = 0; k < n; k++) {
      const i = poller.readyIndex[k];
      cur = conns[i];
      if (poller.readyEvents[k] & EPOLLIN) {
        const end = readInto(cur.sock, cur.inBuf, cur.inEnd);
        if (end < 0) throw new Error("Connection closed by the server during QoS 1 ingest");
        const used = scanPackets(cur.inBuf, end, onPuback, ignore);
        if (used > 0) cur.inBuf.copyWithin(0, used, end);
        cur.inEnd = end - used;
      }
      send(cur, i);
    }
  }
  conns.forEach((x) => x.sock.close());
  poller.close();
  return {
    msgs: acked,
    elapsedMs: tm,
    msgsPerSec: acked / (tm / 1000),
    puback: hist.summary(),
    io: "libc-epoll",
    ...c,
  };
}
