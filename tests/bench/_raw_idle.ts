/**
 * The idle scenario's connect burst over {@link RawSocket}: `count` connections, at most
 * `inFlight` of them between connect() and CONNACK, all driven by one synchronous epoll loop;
 * each stays open and unread once its CONNACK arrived. Over Deno sockets the burst cost this
 * process an op, a promise and a wake per connect, write and read: it ran at 86% of its core on
 * both servers' runs, so connects/s measured the client. Here a connection costs socket(),
 * connect(), one write of its pre-encoded CONNECT, one epoll_ctl and one read of the CONNACK
 * (its bytes checked in place), and a wake serves every connection that is ready.
 *
 * @module
 */
import { DISCONNECT, encodeConnect } from "./_mqtt.ts";
import { EPOLLIN, EPOLLONESHOT, EPOLLOUT, Poller, RawSocket } from "./_raw_socket.ts";

/** What the burst is given. */
export interface IdleOptions {
  readonly port: number;
  readonly count: number;
  /** Connections between connect() and CONNACK at once. */
  readonly inFlight: number;
  /** Starts the CPU window; its result is called at the last CONNACK. */
  readonly cpuWindow: () => () => Record<string, number>;
}

/** A connection's CONNECT is (partly) unwritten: it waits to be writable. */
const WRITING = 1;
/** Its CONNECT is written: it waits for the CONNACK. */
const AWAITING = 2;

/**
 * The CONNACK a clean-session CONNECT gets: type, remaining length 2, session present 0
 * [MQTT-3.2.2-1], return code 0.
 */
const CONNACK = [0x20, 0x02, 0x00, 0x00];

/**
 * `count` idle connections to one server, opened by {@link IdleBurst.run}, closed by
 * {@link IdleBurst.close}.
 */
export class IdleBurst {
  readonly #o: IdleOptions;
  /** Every connection's CONNECT (client id `bench-idle-<i>`), encoded before the burst. */
  readonly #connects: Uint8Array[];
  readonly #socks: RawSocket[] = [];
  readonly #state: Uint8Array;
  /** CONNECT bytes written, CONNACK bytes read, per connection. */
  readonly #written: Uint16Array;
  readonly #got: Uint8Array;
  readonly #scratch = new Uint8Array(CONNACK.length);
  #poller: Poller | null = null;
  #next = 0;
  #open = 0;

  constructor(o: IdleOptions) {
    this.#o = o;
    this.#connects = Array.from(
      { length: o.count },
      (_, i) => encodeConnect(`bench-idle-${i}`, 600),
    );
    this.#state = new Uint8Array(o.count);
    this.#written = new Uint16Array(o.count);
    this.#got = new Uint8Array(o.count);
  }

  /** The connections opened (each connected; the fleet scenario drives them on). */
  get sockets(): readonly RawSocket[] {
    return this.#socks;
  }

  /**
   * Opens every connection, `inFlight` at a time; returns the time to the last CONNACK and the
   * CPU over it. Throws when one is refused or closed, or when the burst outlasts
   * `60 s + 1 ms per connection`: the loop blocks the event loop, so the load generator's own
   * time bound could not end it.
   */
  run(): { elapsedMs: number; cpu: Record<string, number> } {
    const poller = this.#poller = new Poller(Math.max(1, this.#o.inFlight));
    const t0 = performance.now();
    const deadline = t0 + 60_000 + this.#o.count;
    const cpu = this.#o.cpuWindow();
    while (this.#next < this.#o.count && this.#next < this.#o.inFlight) this.#start();
    while (this.#open < this.#o.count) {
      if (performance.now() > deadline) {
        throw new Error(`Only ${this.#open} of ${this.#o.count} idle connections got a CONNACK`);
      }
      const n = poller.wait(50);
      for (let k = 0; k < n; k++) this.#serve(poller.readyIndex[k]);
    }
    const elapsedMs = performance.now() - t0;
    const c = cpu();
    // The sockets stay open; ONESHOT left each one disarmed, so nothing is watched any more.
    poller.close();
    this.#poller = null;
    return { elapsedMs, cpu: c };
  }

  /**
   * Connects the next connection and writes its CONNECT at once: on loopback the handshake is
   * usually done when connect() returns, and a write before it takes nothing (then it waits to
   * be writable). TCP_NODELAY is not set: each socket sends one packet before DISCONNECT.
   */
  #start(): void {
    const i = this.#next++;
    this.#socks[i] = RawSocket.open(this.#o.port);
    this.#state[i] = WRITING;
    this.#poller!.add(this.#socks[i], i, this.#writeConnect(i));
  }

  /** Writes what the socket takes of `i`'s CONNECT; the events `i` waits for next. */
  #writeConnect(i: number): number {
    const w = this.#socks[i].write(this.#connects[i], this.#written[i]);
    if (w < 0) this.#fail(i, "connection refused or reset before CONNECT");
    this.#written[i] += w;
    if (this.#written[i] < this.#connects[i].length) return EPOLLOUT | EPOLLONESHOT;
    this.#state[i] = AWAITING;
    return EPOLLIN | EPOLLONESHOT;
  }

  /** Moves connection `i` on: writes the rest of its CONNECT, or reads and checks its CONNACK. */
  #serve(i: number): void {
    const s = this.#socks[i];
    if (this.#state[i] === WRITING) {
      this.#poller!.modify(s, i, this.#writeConnect(i));
      return;
    }
    const got = this.#got[i];
    const n = s.readSome(this.#scratch, got);
    if (n < 0) this.#fail(i, "connection closed before CONNACK");
    for (let k = got; k < got + n; k++) {
      if (this.#scratch[k] === CONNACK[k]) continue;
      if (k === 3) this.#fail(i, `CONNACK refused: return code ${this.#scratch[k]}`);
      const seen = [...this.#scratch.subarray(got, got + n)];
      this.#fail(i, `expected CONNACK, got bytes ${seen} from offset ${got}`);
    }
    this.#got[i] = got + n;
    if (got + n < CONNACK.length) {
      this.#poller!.modify(s, i, EPOLLIN | EPOLLONESHOT);
      return;
    }
    this.#open++;
    if (this.#next < this.#o.count) this.#start();
  }

  #fail(i: number, why: string): never {
    throw new Error(`Cannot connect "bench-idle-${i}": ${why}`);
  }

  /** DISCONNECT (what the socket takes now) and close, on every connection opened. */
  close(): void {
    for (const s of this.#socks) {
      if (s === undefined) continue;
      s.write(DISCONNECT);
      s.close();
    }
    this.#socks.length = 0;
    this.#poller?.close();
    this.#poller = null;
  }
}
