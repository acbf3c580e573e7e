/**
 * What the admin actions read and change, taken from the gateway's parts: the connected clients
 * (the connection registry), the stored sessions, the local log's streams, topics and
 * partitions, and the logger's level. `admin.ts` serves them over HTTP; this module knows
 * nothing of HTTP.
 *
 * @module
 */
import { Connection } from "../session/connection.ts";
import type { StoredSession } from "../session/stored_sessions.ts";
import type { LogBackend, PartitionAddress } from "../log/port.ts";
import type { LocalLog } from "../log/local_log.ts";
import type { Logger } from "../observe/logger.ts";

/** MQTT 5 DISCONNECT reason 0x98 Administrative action. */
export const ADMINISTRATIVE_ACTION = 0x98;

/** One connected client as the admin listing and the status page show it. */
export interface ClientRow {
  readonly client_id: string;
  /** The principal ("" anonymous). */
  readonly user: string;
  readonly address: string;
  readonly listener: string;
  readonly protocol: "3.1.1" | "5";
  /** Wall-clock ms when its socket was accepted. */
  readonly since_ms: number;
  readonly messages_in: number;
  readonly messages_out: number;
  readonly queued_bytes: number;
  /** Whether it holds a stored session (clean session 0, or an MQTT 5 expiry above 0). */
  readonly stored_session: boolean;
}

/** One stored session as the admin listing shows it. */
export interface SessionRow {
  readonly client_id: string;
  readonly owner: string | null;
  readonly protocol: "3.1.1" | "5";
  /** Connected now (to this gateway or, as its record says, to another on the same log). */
  readonly connected: boolean;
  readonly offline_since_ms: number | null;
  readonly expiry_s: number;
  /** When it is removed if its client stays away; null while connected. */
  readonly expires_at_ms: number | null;
  readonly subscriptions: readonly string[];
  /** Triples (stream/topic/partition) it holds positions on. */
  readonly triples: number;
}

/** One partition of the local log: its messages and their bytes (null: the log cannot say). */
export interface PartitionRow {
  readonly partition: number;
  readonly first_offset: number | null;
  readonly next_offset: number;
  readonly messages: number;
  readonly bytes: number | null;
}

/** One topic of the local log, its partitions summed. */
export interface TopicRow {
  readonly stream: string;
  readonly topic: string;
  readonly messages: number;
  readonly bytes: number | null;
  readonly partitions: readonly PartitionRow[];
}

/** What a disconnect did. */
export interface DisconnectResult {
  readonly disconnected: boolean;
  readonly protocol?: "3.1.1" | "5";
  readonly session_dropped: boolean;
}

/** The gateway parts the admin actions use (the `Gateway` has them). */
export interface AdminParts {
  readonly registry: { all(): readonly unknown[] };
  readonly sessions: {
    list(): StoredSession[];
    get(clientId: string): StoredSession | undefined;
    remove(clientId: string): void;
    expiryOf(s: StoredSession): number;
  };
  /** The log: the one on this machine adds its byte counts ({@link LocalLog}). */
  readonly backend:
    & Pick<LogBackend, "kind" | "listTopics" | "nextOffset">
    & Partial<Pick<LocalLog, "partitionBytes">>;
  readonly logger: Logger;
}

/** The admin actions over the gateway's parts. */
export class AdminSource {
  readonly #g: AdminParts;
  readonly #wallOf: (clockMs: number) => number;

  /** `clockNow`: the clock connections stamp their accept time with (monotonic ms). */
  constructor(parts: AdminParts, clockNow: () => number = () => performance.now()) {
    this.#g = parts;
    this.#wallOf = (t) => Math.round(Date.now() - (clockNow() - t));
  }

  get logger(): Logger {
    return this.#g.logger;
  }

  /** Connected clients (those past CONNECT), oldest first. */
  clients(): ClientRow[] {
    return this.#connected()
      .sort((a, b) => a.acceptedAt - b.acceptedAt)
      .map((c) => ({
        client_id: c.clientId,
        user: c.ownerName ?? "",
        address: c.remoteAddress,
        listener: c.listener,
        protocol: c.speaks5 ? "5" : "3.1.1",
        since_ms: this.#wallOf(c.acceptedAt),
        messages_in: c.messagesIn,
        messages_out: c.outbox.published,
        queued_bytes: c.outbox.queuedBytes,
        stored_session: c.session !== null,
      }));
  }

  /**
   * Closes the client's connection (MQTT 5: DISCONNECT 0x98 Administrative action first; its
   * will, if any, is published as for any end that is not its own DISCONNECT) and, with
   * `discardSession`, removes its stored session. `disconnected: false` when no client of that
   * id is connected.
   */
  disconnect(clientId: string, discardSession: boolean): DisconnectResult {
    const c = this.#connected().find((x) => x.clientId === clientId);
    if (c === undefined) return { disconnected: false, session_dropped: false };
    const protocol = c.speaks5 ? "5" : "3.1.1";
    c.disconnect(ADMINISTRATIVE_ACTION, "administrative action");
    const stored = discardSession && this.#g.sessions.get(clientId) !== undefined;
    if (stored) this.#g.sessions.remove(clientId);
    return { disconnected: true, protocol, session_dropped: stored };
  }

  /** Stored sessions, by client id. */
  sessions(): SessionRow[] {
    const s = this.#g.sessions;
    return s.list()
      .sort((a, b) => (a.clientId < b.clientId ? -1 : a.clientId > b.clientId ? 1 : 0))
      .map((x) => {
        const expiry = s.expiryOf(x);
        const off = x.offlineSinceMs;
        return {
          client_id: x.clientId,
          owner: x.owner ?? null,
          protocol: x.mqtt5 === true ? "5" : "3.1.1",
          connected: off === null,
          offline_since_ms: off,
          expiry_s: expiry,
          expires_at_ms: off === null ? null : off + expiry * 1000,
          subscriptions: [...x.subscriptions.keys()],
          triples: x.triples.size,
        };
      });
  }

  /**
   * Removes a stored session whose client is not connected here: "connected" when it is (the
   * client would write it again; disconnect it with its session instead), "none" when no
   * session of that id is stored.
   */
  dropSession(clientId: string): "dropped" | "connected" | "none" {
    if (this.#connected().some((c) => c.clientId === clientId)) return "connected";
    if (this.#g.sessions.get(clientId) === undefined) return "none";
    this.#g.sessions.remove(clientId);
    return "dropped";
  }

  /**
   * The local log's topics with their partitions' message counts and bytes, largest first,
   * reading at most `maxPartitions` partitions (`partial`: some were left out). Null when the
   * backend cannot list its topics.
   */
  async topics(
    maxPartitions = Infinity,
  ): Promise<{ topics: TopicRow[]; partial: boolean } | null> {
    const b = this.#g.backend;
    if (b.listTopics === undefined) return null;
    const rows: TopicRow[] = [];
    let budget = maxPartitions;
    const listed = await b.listTopics();
    for (const t of listed) {
      if (budget < t.partitions) break;
      budget -= t.partitions;
      const partitions: PartitionRow[] = [];
      for (let partition = 0; partition < t.partitions; partition++) {
        partitions.push(await partitionRow(b, { stream: t.stream, topic: t.topic, partition }));
      }
      const bytes = partitions.every((p) => p.bytes !== null)
        ? partitions.reduce((n, p) => n + p.bytes!, 0)
        : null;
      const messages = partitions.reduce((n, p) => n + p.messages, 0);
      rows.push({ stream: t.stream, topic: t.topic, messages, bytes, partitions });
    }
    rows.sort((x, y) => (y.bytes ?? y.messages) - (x.bytes ?? x.messages));
    return { topics: rows, partial: rows.length < listed.length };
  }

  #connected(): Connection[] {
    return this.#g.registry.all().filter((c): c is Connection =>
      c instanceof Connection && !c.closed && c.clientId !== ""
    );
  }
}

async function partitionRow(b: AdminParts["backend"], a: PartitionAddress): Promise<PartitionRow> {
  if (b.partitionBytes !== undefined) {
    const p = await b.partitionBytes(a);
    return {
      partition: a.partition,
      first_offset: p.start,
      next_offset: p.next,
      messages: p.next - p.start,
      bytes: p.retainedBytes,
    };
  }
  // Iggy: only the next offset is known without reading; its retention is not seen here.
  const next = await b.nextOffset(a);
  return {
    partition: a.partition,
    first_offset: null,
    next_offset: next,
    messages: next,
    bytes: null,
  };
}
