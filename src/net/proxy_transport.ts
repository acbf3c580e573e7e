/**
 * The PROXY protocol on a listener (`listeners.proxy_protocol_from`): every accepted transport
 * goes through a {@link ProxyAcceptor}. From a trusted source (a load balancer) the header is
 * read first, within the connect timeout, and the connection is handed on under the client's
 * address, which then drives per-source limits, the anonymous rules and every log line. From
 * any other source the connection is handed on as it is, but one whose first bytes are a PROXY
 * header is closed: that source may not say whose connection it is.
 *
 * Layer-free: it wraps any {@link Transport} (the epoll layer's and node:net's sockets alike);
 * TLS reads the header off the TCP socket before its handshake (`tls_listener.ts`) with the
 * same {@link ProxyPreamble}.
 *
 * @module
 */
import type { IpBlockSet } from "../base/ip.ts";
import type { Transport, TransportSink } from "../session/transport.ts";
import type { AcceptHandler } from "./mqtt_listener.ts";
import { looksLikeProxyHeader, parseProxyHeader } from "./proxy_header.ts";

/** Why a connection was closed for its PROXY header (the refusal counter's `reason`). */
export type ProxyRefusal =
  /** Malformed or oversized, from a trusted source. */
  | "proxy_header"
  /** Not whole within the connect timeout. */
  | "proxy_timeout"
  /** From a source not in `listeners.proxy_protocol_from`. */
  | "proxy_untrusted"
  /** Over the bound of connections waiting for their header. */
  | "proxy_pending";

/** A connection closed for its PROXY header. */
export interface ProxyRefused {
  readonly why: ProxyRefusal;
  /** The peer that sent it (the balancer, or the untrusted source). */
  readonly remote: string;
  readonly reason: string;
}

/** The PROXY protocol settings of a listener. */
export interface ProxyOptions {
  /** Sources trusted to send a PROXY header, which they then must. */
  readonly trusted: IpBlockSet;
  /** A trusted source's header must be whole by then (`limits.connect_timeout_ms`). */
  readonly timeoutMs: number;
  /** Connections waiting for their header at once (`limits.max_connections`); more are closed. */
  readonly maxPending: number;
  onRefused(r: ProxyRefused): void;
}

/** One step of reading a connection's first bytes. */
export type PreambleStep =
  | { readonly kind: "more" }
  /** Read: `source` is the client's address (null: the peer's own); `rest` follows the header. */
  | { readonly kind: "done"; readonly source: string | null; readonly rest: Uint8Array }
  | {
    readonly kind: "refused";
    readonly why: "proxy_header" | "proxy_untrusted";
    readonly reason: string;
  };

/**
 * Reads a connection's first bytes: from a trusted source the PROXY header (held across reads,
 * at most one header's bound), from another only a look at the first read.
 */
export class ProxyPreamble {
  readonly #trusted: boolean;
  #held: Uint8Array | null = null;

  constructor(trusted: boolean) {
    this.#trusted = trusted;
  }

  /** The next read; `rest` of a `done` step is valid only as long as `chunk` is. */
  push(chunk: Uint8Array): PreambleStep {
    if (!this.#trusted) {
      if (!looksLikeProxyHeader(chunk)) return { kind: "done", source: null, rest: chunk };
      const reason = "PROXY header from a source not in listeners.proxy_protocol_from";
      return { kind: "refused", why: "proxy_untrusted", reason };
    }
    const bytes = this.#held === null ? chunk : joined(this.#held, chunk);
    const parsed = parseProxyHeader(bytes);
    if (parsed.kind === "more") {
      this.#held = bytes === chunk ? chunk.slice() : bytes;
      return parsed;
    }
    this.#held = null;
    if (parsed.kind === "bad") {
      return { kind: "refused", why: "proxy_header", reason: parsed.reason };
    }
    return { kind: "done", source: parsed.source, rest: bytes.subarray(parsed.length) };
  }
}

function joined(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * Puts the PROXY protocol in front of a listener's accept handler. Connections waiting for
 * their header share one timer, not one each (as keep-alives share one deadline wheel): every
 * one has the same timeout, so the oldest is always due first.
 */
export class ProxyAcceptor {
  readonly #o: ProxyOptions;
  readonly #onAccept: AcceptHandler;
  /** Trusted connections waiting for their header, oldest first. */
  readonly #waiting = new Set<ProxiedTransport>();
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(o: ProxyOptions, onAccept: AcceptHandler) {
    this.#o = o;
    this.#onAccept = onAccept;
  }

  /** Connections waiting for their header now. */
  get pending(): number {
    return this.#waiting.size;
  }

  /** The listener's accept handler. */
  readonly accept = (t: Transport): void => {
    if (!this.#o.trusted.has(t.remoteAddress)) {
      return this.#onAccept(new ProxiedTransport(t, this, false));
    }
    if (this.#waiting.size >= this.#o.maxPending) {
      t.close();
      const reason = `${this.#waiting.size} connections wait for their PROXY header already`;
      return this.#o.onRefused({ why: "proxy_pending", remote: t.remoteAddress, reason });
    }
    const w = new ProxiedTransport(t, this, true);
    this.#waiting.add(w);
    this.#arm();
    t.start(w);
  };

  /** A trusted connection's header phase ended (read, refused, timed out or abandoned). */
  settled(t: ProxiedTransport): void {
    this.#waiting.delete(t);
  }

  opened(t: ProxiedTransport): void {
    this.#onAccept(t);
  }

  refused(why: ProxyRefusal, remote: string, reason: string): void {
    this.#o.onRefused({ why, remote, reason });
  }

  /** The timer, for the oldest waiting connection's deadline. */
  #arm(): void {
    if (this.#timer !== undefined) return;
    const oldest = this.#waiting.values().next();
    if (oldest.done) return;
    const due = oldest.value.acceptedAt! + this.#o.timeoutMs - performance.now();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#expire();
    }, Math.max(0, due));
  }

  #expire(): void {
    const now = performance.now();
    for (const w of this.#waiting) {
      if (w.acceptedAt! + this.#o.timeoutMs > now) break;
      w.expire(this.#o.timeoutMs); // leaves the set (deleting while iterating a Set is safe)
    }
    this.#arm();
  }
}

/**
 * A transport whose first bytes are read by a {@link ProxyPreamble}; then the connection's,
 * under the client's address. Reads after the header go straight through.
 */
export class ProxiedTransport implements Transport, TransportSink {
  remoteAddress: string;
  readonly acceptedAt: number | undefined;
  readonly #inner: Transport;
  readonly #acceptor: ProxyAcceptor;
  readonly #trusted: boolean;
  #preamble: ProxyPreamble | null;
  #sink: TransportSink | null = null;
  /** Bytes read past the header before the connection took them (and any read since). */
  #rest: Uint8Array | null = null;
  /** The inner transport ended before the connection could hear it. */
  #ended: { error?: unknown } | null = null;
  #paused = false;
  #flushing = false;

  constructor(inner: Transport, acceptor: ProxyAcceptor, trusted: boolean) {
    this.#inner = inner;
    this.#acceptor = acceptor;
    this.#trusted = trusted;
    this.remoteAddress = inner.remoteAddress;
    // The connect deadline runs from the accept, header included.
    this.acceptedAt = inner.acceptedAt ?? (trusted ? performance.now() : undefined);
    this.#preamble = new ProxyPreamble(trusted);
  }

  get listener(): string | undefined {
    return this.#inner.listener;
  }

  get certificateName(): string | undefined {
    return this.#inner.certificateName;
  }

  start(sink: TransportSink): void {
    if (this.#sink !== null) return;
    this.#sink = sink;
    if (!this.#trusted) return this.#inner.start(this);
    this.#paused = false;
    this.#flushing = true;
    queueMicrotask(() => this.#flush()); // not inside start: the connection is not ready yet
  }

  pause(): void {
    this.#paused = true;
    this.#inner.pause();
  }

  resume(): void {
    this.#paused = false;
    if (this.#rest !== null || this.#ended !== null) {
      if (!this.#flushing) {
        this.#flushing = true;
        queueMicrotask(() => this.#flush());
      }
      return;
    }
    this.#inner.resume();
  }

  write(bytes: Uint8Array): Promise<number> {
    return this.#inner.write(bytes);
  }

  close(): void {
    this.#endHeaderPhase();
    this.#inner.close();
  }

  data(chunk: Uint8Array): void {
    if (this.#preamble === null && this.#rest === null && this.#sink !== null) {
      return this.#sink.data(chunk);
    }
    if (this.#preamble === null) {
      this.#rest = this.#rest === null ? chunk.slice() : joined(this.#rest, chunk);
      return;
    }
    const step = this.#preamble.push(chunk);
    if (step.kind === "more") return;
    this.#preamble = null;
    if (step.kind === "refused") {
      this.#endHeaderPhase();
      this.#inner.close();
      return this.#acceptor.refused(step.why, this.#inner.remoteAddress, step.reason);
    }
    if (!this.#trusted) return this.#sink?.data(step.rest);
    this.#endHeaderPhase();
    this.remoteAddress = step.source ?? this.#inner.remoteAddress;
    if (step.rest.length > 0) this.#rest = step.rest.slice();
    // Nothing more is read until the connection starts (and its start hands on the rest).
    this.#inner.pause();
    this.#acceptor.opened(this);
  }

  end(error?: unknown): void {
    if (this.#preamble !== null && this.#trusted) {
      // Closed before its header was whole: a balancer's plain TCP check, or a client gone.
      this.#preamble = null;
      this.#endHeaderPhase();
      return;
    }
    if (this.#sink === null || this.#rest !== null || this.#flushing) {
      this.#ended = { error };
      return;
    }
    this.#sink.end(error);
  }

  /** The header deadline passed. */
  expire(ms: number): void {
    if (this.#preamble === null) return;
    this.#preamble = null;
    this.#endHeaderPhase();
    this.#inner.close();
    const reason = `no whole PROXY header within ${ms} ms`;
    this.#acceptor.refused("proxy_timeout", this.#inner.remoteAddress, reason);
  }

  /** A trusted connection no longer waits for its header: its deadline and slot go. */
  #endHeaderPhase(): void {
    if (this.#trusted) this.#acceptor.settled(this);
  }

  /** Hands the connection what was read past the header, then reads on (unless paused). */
  #flush(): void {
    this.#flushing = false;
    const sink = this.#sink!;
    const rest = this.#rest;
    if (rest !== null && !this.#paused) {
      this.#rest = null;
      sink.data(rest);
    }
    if (this.#paused || this.#rest !== null) return;
    const ended = this.#ended;
    if (ended !== null) {
      this.#ended = null;
      return sink.end(ended.error);
    }
    this.#inner.resume();
  }
}
