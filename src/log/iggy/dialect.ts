/**
 * The two wire dialects, chosen per connection (`iggy.protocol`): 0.11 (Iggy 0.9, lockstep)
 * and 0.12 (Iggy 0.10, pipelined, routed). A dialect bundles what differs for the layers
 * above: how a connection is opened, the record decoders, the create-topic options, what
 * "acknowledged on disk" means, and the partition operations (send, poll, offsets). `auto` registers with the newest dialect and,
 * on an IncompatibleProtocol eviction, reads the server's accepted window and registers again
 * with the dialect (and exact version number) that fits.
 *
 * @module
 */

import { decodePollReply, type PollReply } from "./batch.ts";
import { IggyConnectionError, IggyError, IggyEvictionError, Status } from "./codes.ts";
import * as cmd from "./v11/request_bodies.ts";
import { IggyConnection } from "./v11/lockstep_connection.ts";
import type { Dialer, Transport } from "./dial.ts";
import type { Credentials, RegisterReply } from "./login.ts";
import {
  decodeStreamDetails,
  decodeStreams,
  decodeTopic,
  decodeUser,
  type StreamRecord,
  type TopicRecord,
  type UserRecord,
} from "./v11/records.ts";
import { formatVersion, PROTOCOL_VERSION_PACKED, unpackVersion } from "./version.ts";
import {
  createTopicBody012,
  DURABILITY_OPTION,
  DURABILITY_PERSISTED,
} from "./v12/topic_options.ts";
import {
  IggyConnection012,
  type RequestOptions012,
  type SessionState012,
} from "./v12/pipelined_connection.ts";
import { decodePollReply012 } from "./v12/deferred_poll.ts";
import {
  decodeStreamDetails012,
  decodeStreams012,
  decodeTopic012,
  decodeUser012,
} from "./v12/records.ts";
import { PROTOCOL_012_PACKED } from "./v12/wire.ts";
import type { PartitionOps, PartitionOpsDeps } from "./partition_ops.ts";
import { PartitionOps011 } from "./v11/partitions.ts";
import { PartitionOps012 } from "./v12/partitions.ts";

/** What `iggy.protocol` may say. */
export type ProtocolSetting = "auto" | "0.11" | "0.12";
/** Names of the dialects. */
export type DialectName = "0.11" | "0.12";

/** One registered connection, whatever its dialect. */
export interface Link {
  readonly dialect: DialectName;
  readonly closed: Promise<Error>;
  readonly isClosed: boolean;
  readonly load: number;
  readonly lastUsed: number;
  readonly registration: RegisterReply | undefined;
  /** Replica id of the node that answered (0.12 reply header byte 61). */
  readonly replica?: number;
  /** The 0.12 session this link registered or bound (what BindSession needs). */
  readonly sessionState?: SessionState012;
  /** 0.12: attach to an existing session instead of logging in again. */
  bind?(s: SessionState012): Promise<RegisterReply>;
  register(credentials: Credentials): Promise<RegisterReply>;
  request(code: number, body?: Uint8Array, o?: RequestOptions012): Promise<Uint8Array>;
  requestFramed(code: number, frame: Uint8Array, o?: RequestOptions012): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** What differs between the dialects above the connection. */
export interface Dialect {
  readonly name: DialectName;
  /** Packed protocol version registered with. */
  readonly protocolVersion: number;
  open(transport: Transport, o: { timeoutMs: number; label: string }): Link;
  decodeTopic(body: Uint8Array): TopicRecord | null;
  decodeStreams(body: Uint8Array): StreamRecord[];
  decodeStreamDetails(body: Uint8Array): { stream: StreamRecord; topics: TopicRecord[] } | null;
  decodeUser(body: Uint8Array): UserRecord | null;
  decodePollReply(body: Uint8Array): PollReply;
  createTopicBody(stream: string, topic: string, o: cmd.TopicOptions): Uint8Array;
  /** The topic acknowledges sends before they are on disk. */
  acksBeforeDisk(r: TopicRecord): boolean;
  /** This dialect's partition operations over the pool (one set per backend). */
  partitionOps(deps: PartitionOpsDeps): PartitionOps;
}

/** The 0.11 connection seen as a {@link Link} (route options do not exist there). */
class Link011 implements Link {
  readonly dialect = "0.11";
  readonly #c: IggyConnection;
  constructor(c: IggyConnection) {
    this.#c = c;
  }
  get closed() {
    return this.#c.closed;
  }
  get isClosed() {
    return this.#c.isClosed;
  }
  get load() {
    return this.#c.load;
  }
  get lastUsed() {
    return this.#c.lastUsed;
  }
  get registration() {
    return this.#c.registration;
  }
  register(credentials: Credentials) {
    return this.#c.register(credentials);
  }
  request(code: number, body?: Uint8Array) {
    return this.#c.request(code, body);
  }
  requestFramed(code: number, frame: Uint8Array) {
    return this.#c.requestFramed(code, frame);
  }
  close() {
    return this.#c.close();
  }
}

/** Binary protocol 0.11.0 (Iggy 0.9). */
export const DIALECT_011: Dialect = Object.freeze({
  name: "0.11",
  protocolVersion: PROTOCOL_VERSION_PACKED,
  open: (t: Transport, o: { timeoutMs: number; label: string }) =>
    new Link011(new IggyConnection(t, o)),
  decodeTopic,
  decodeStreams,
  decodeStreamDetails,
  decodeUser,
  decodePollReply,
  createTopicBody: cmd.createTopicBody,
  // Iggy 0.9 keeps sends in a journal; only fsync + flush-every-message puts them on disk.
  acksBeforeDisk: (r: TopicRecord) =>
    r.options.get(cmd.FSYNC_OPTION) !== "true" || r.options.get(cmd.FLUSH_COUNT_OPTION) !== "1",
  partitionOps: (deps: PartitionOpsDeps) => new PartitionOps011(deps),
});

/** Binary protocol 0.12.x (Iggy 0.10), registering as `packed` (default 0.12.2). */
export function dialect012(packed = PROTOCOL_012_PACKED): Dialect {
  return Object.freeze(
    {
      name: "0.12",
      protocolVersion: packed,
      open: (t: Transport, o: { timeoutMs: number; label: string }) =>
        new IggyConnection012(t, { ...o, protocolVersion: packed }),
      decodeTopic: decodeTopic012,
      decodeStreams: decodeStreams012,
      decodeStreamDetails: decodeStreamDetails012,
      decodeUser: decodeUser012,
      decodePollReply: decodePollReply012,
      createTopicBody: createTopicBody012,
      acksBeforeDisk: (r: TopicRecord) => r.options.get(DURABILITY_OPTION) !== DURABILITY_PERSISTED,
      partitionOps: (deps: PartitionOpsDeps) => new PartitionOps012(deps),
    } as const,
  );
}

/**
 * The dialect that fits a server's accepted window [min, max], or null when we speak none of
 * it. On 0.12 only 0.12.2 fits: the layouts of 0.12.0 and 0.12.1 differ from it (0.12.2 added
 * the member lists of partition records) and this client decodes 0.12.2's alone.
 */
export function dialectForWindow(min: number, max: number): Dialect | null {
  if (min > max) return null;
  const lo = unpackVersion(min);
  const hi = unpackVersion(max);
  const within = (major: number, minor: number) =>
    (lo.major < major || (lo.major === major && lo.minor <= minor)) &&
    (hi.major > major || (hi.major === major && hi.minor >= minor));
  if (within(0, 12)) {
    return min <= PROTOCOL_012_PACKED && PROTOCOL_012_PACKED <= max ? dialect012() : null;
  }
  if (within(0, 11)) return DIALECT_011;
  return null;
}

/** Words for a window: "0.12.2" or "0.11.0..0.11.3". */
export function formatWindow(min: number, max: number): string {
  return min === max ? formatVersion(max) : `${formatVersion(min)}..${formatVersion(max)}`;
}

/** What this gateway speaks, for refusals. */
export const OUR_WINDOWS = `0.11.x (Iggy 0.9) and 0.12.2 (Iggy 0.10, as the official codec has it)`;

/** The 0.12 session the service connections share (set by the first Register). */
export class SessionKeeper {
  current: SessionState012 | undefined;
}

/** The server speaks a protocol we do not: the gateway refuses to start. */
export class UnsupportedProtocolError extends IggyError {
  constructor(min: number, max: number) {
    super(
      Status.INCOMPATIBLE_PROTOCOL,
      `Iggy server accepts binary protocol ${formatWindow(min, max)}; this gateway speaks ` +
        `${OUR_WINDOWS}: use an Iggy server 0.9 or 0.10, or a gateway that speaks its protocol`,
    );
    this.name = "UnsupportedProtocolError";
  }
}

/**
 * Chooses the dialect per connection. Fixed settings use their dialect (adjusting the patch
 * number to the server's window); `auto` starts with 0.12 and learns the server's window from
 * its eviction. Once a Register succeeded, later connections use that dialect directly.
 */
export class DialectChooser {
  readonly #setting: ProtocolSetting;
  #known: Dialect | undefined;

  constructor(setting: ProtocolSetting) {
    this.#setting = setting;
    if (setting === "0.11") this.#known = DIALECT_011;
    if (setting === "0.12") this.#known = dialect012();
  }

  get setting(): ProtocolSetting {
    return this.#setting;
  }

  /** The dialect of the last successful Register (or the fixed one), if any. */
  get current(): Dialect | undefined {
    return this.#known;
  }

  /**
   * Dials and logs in: binds to `keeper`'s 0.12 session when there is one (saving a login),
   * else registers, re-registering once with the dialect the server's window names. A new 0.12
   * session is left in `keeper` for the next connection.
   */
  async connect(
    dial: Dialer,
    credentials: Credentials,
    o: { timeoutMs: number; label: string },
    keeper?: SessionKeeper,
  ): Promise<Link> {
    const bound = await this.#bind(dial, o, keeper);
    if (bound) return bound;
    const link = await this.#register(dial, credentials, o);
    if (keeper && link.sessionState) keeper.current = link.sessionState;
    return link;
  }

  async #bind(
    dial: Dialer,
    o: { timeoutMs: number; label: string },
    keeper?: SessionKeeper,
  ): Promise<Link | undefined> {
    const s = keeper?.current;
    if (!s || this.#known?.name !== "0.12") return undefined;
    const link = this.#known.open(await dial(), o);
    try {
      await link.bind!(s);
      return link;
    } catch {
      await link.close();
      if (keeper!.current === s) keeper!.current = undefined; // the session is gone: log in
      return undefined;
    }
  }

  async #register(
    dial: Dialer,
    credentials: Credentials,
    o: { timeoutMs: number; label: string },
  ): Promise<Link> {
    let d = this.#known ?? dialect012();
    for (let attempt = 0;; attempt++) {
      const link = d.open(await dial(), o);
      try {
        await link.register(credentials);
        this.#known = d;
        return link;
      } catch (e) {
        await link.close();
        const window = incompatibleWindow(e);
        if (!window) throw e;
        const fits = dialectForWindow(window.min, window.max);
        const allowed = fits && (this.#setting === "auto" || fits.name === this.#setting);
        if (!allowed || attempt > 0 || fits.protocolVersion === d.protocolVersion) {
          throw fits && !allowed ? wrongSetting(this.#setting, window) : unsupported(window, e);
        }
        d = fits;
      }
    }
  }
}

function incompatibleWindow(e: unknown): { min: number; max: number } | undefined {
  if (!(e instanceof IggyEvictionError) || e.code !== Status.INCOMPATIBLE_PROTOCOL) return;
  return { min: e.serverVersionMin, max: e.serverVersion };
}

function unsupported(w: { min: number; max: number }, cause: unknown): Error {
  const e = new UnsupportedProtocolError(w.min, w.max);
  (e as { cause?: unknown }).cause = cause;
  return e;
}

function wrongSetting(setting: ProtocolSetting, w: { min: number; max: number }): Error {
  return new IggyConnectionError(
    `Iggy server accepts binary protocol ${formatWindow(w.min, w.max)}, but iggy.protocol is ` +
      `"${setting}" (this gateway speaks ${OUR_WINDOWS}): set iggy.protocol = "auto"`,
  );
}
