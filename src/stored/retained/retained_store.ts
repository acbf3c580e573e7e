/**
 * Retained messages, kept in the log (DESIGN rule 1): one record per retained set or clear in a
 * single-partition topic of their own (`retained.stream` / `retained.topic`,
 * `retained_record.ts`), on the embedded log and on Iggy alike, so the set survives restarts and
 * every gateway sharing an Iggy reads the same records in the same order. The set in memory
 * (`retained_set.ts`) is what the records say, read in offset order: a gateway's own set is
 * appended, then read back with everything before it, so two gateways never apply the same
 * records in different orders. In Iggy mode the topic is also read every
 * `retained.poll_interval_ms`, so gateways agree within one poll.
 *
 * Compaction: a start reads from the latest complete snapshot, not from the topic's start. A
 * snapshot (a marker, then every retained message restated) is written when the changes read
 * since the last one outnumber max(1,000, the retained set), or a day after it (the topic's
 * retention by size then never reaches the latest snapshot); the marker's offset is stored as
 * the consumer offset of {@link SNAPSHOT_CONSUMER} only once the whole snapshot is appended. A
 * start reads the marker, then from its base on: the snapshot's entries make the set as of the
 * base, and the changes after the base (other gateways' sets written meanwhile) apply after them.
 * So a start reads about twice the live set at most, whatever the history.
 *
 * @module
 */
import { coalesced } from "../../base/coalesced.ts";
import { wallClock } from "../../base/wall_clock.ts";
import type { GatewayConfig } from "../../config/types.ts";
import type { Logger } from "../../observe/logger.ts";
import { envelope, H_EMPTY } from "../envelope.ts";
import { storedExpiry } from "../envelope_v5.ts";
import { readToEnd } from "../read_to_end.ts";
import {
  type LogBackend,
  NO_WAIT,
  type OutgoingMessage,
  type PartitionAddress,
  type StoredMessage,
} from "../../log/port.ts";
import {
  markerRecord,
  readRecord,
  type SnapshotMarker,
  snapshotRecord,
} from "./retained_record.ts";
import {
  entryOf,
  messageOf,
  type RetainedBounds,
  type RetainedEntry,
  type RetainedRoom,
  RetainedSet,
} from "./retained_set.ts";

/** Consumer name under which the offset of the latest complete snapshot's marker is stored. */
export const SNAPSHOT_CONSUMER = "mqtt-retained-snapshot";
const READ_BATCH = 1000;
const SNAPSHOT_BATCH = 500;
const SNAPSHOT_MIN_CHANGES = 1000;
const SNAPSHOT_MAX_AGE_MS = 86_400_000;
/** Retention by age of the embedded log's retained topic: none (it is bounded by size). */
const NEVER_MICROS = Number.MAX_SAFE_INTEGER;

/** Options of the store. */
export interface RetainedStoreOptions extends RetainedBounds {
  readonly stream: string;
  readonly topic: string;
  /** Iggy mode: read the topic this often for other gateways' changes (ms); 0 = never. */
  readonly pollIntervalMs: number;
  /** Wall clock, ms since the epoch. */
  readonly now?: () => number;
}

/**
 * The options of `[retained]` and `[limits]`. The embedded log has no other writer: its topic
 * is read only after this gateway's own sets (no poll interval).
 */
export function retainedOptionsOf(
  config: GatewayConfig,
  backendKind: string,
): RetainedStoreOptions {
  const l = config.limits;
  return {
    stream: config.retained.stream,
    topic: config.retained.topic,
    pollIntervalMs: backendKind === "embedded" ? 0 : config.retained.poll_interval_ms,
    maxMessages: l.max_retained_messages,
    maxBytes: l.max_retained_bytes,
    maxMessageBytes: l.max_retained_message_bytes,
  };
}

/** What happened to records that could not be kept. */
export interface RetainedCounters {
  /** Records read that were not retained records (skipped). */
  malformed: number;
  /** Sets read that did not fit the bounds (another gateway's, or a lowered bound). */
  overBound: number;
}

/** The retained messages of the gateway: the set in memory, and its records in the log. */
export class RetainedStore {
  readonly set: RetainedSet;
  readonly counters: RetainedCounters = { malformed: 0, overBound: 0 };
  /** What the last start read: the snapshot's entries and the changes after its base. */
  readonly lastLoad = { snapshotEntries: 0, changes: 0 };
  readonly #backend: LogBackend;
  readonly #opts: RetainedStoreOptions;
  readonly #logger: Logger;
  readonly #address: PartitionAddress;
  readonly #now: () => number;
  /** Next record offset to read. */
  #readFrom = 0;
  #loaded = false;
  #changesSinceSnapshot = 0;
  #snapshotAtMs = 0;
  /** The snapshot this gateway is writing: its marker's id, and its offset once read back. */
  #writing: { id: string; marker: number | null } | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The snapshot being written, if any (a stop waits for it). */
  #snapshotting: Promise<void> = Promise.resolve();

  constructor(backend: LogBackend, opts: RetainedStoreOptions, logger: Logger) {
    this.#backend = backend;
    this.#opts = opts;
    this.#logger = logger;
    this.#now = opts.now ?? (() => wallClock.now());
    this.set = new RetainedSet(opts);
    this.#address = { stream: opts.stream, topic: opts.topic, partition: 0 };
  }

  /** Where the records are. */
  get address(): PartitionAddress {
    return this.#address;
  }

  /**
   * Creates the topic when missing and reads the retained set from the latest snapshot on.
   * Resolves false (logged) when the log cannot answer: retained sets are then refused until a
   * later {@link sync} succeeds.
   */
  async load(): Promise<boolean> {
    try {
      await this.#ensureTopic();
      this.set.clear();
      const marker = await this.#latestSnapshot();
      await this.#readFromSnapshot(marker);
      this.#loaded = true;
      return true;
    } catch (err) {
      this.#logger.limited("warn", "Retained messages unavailable", { error: err });
      return false;
    }
  }

  /** Starts the reads for other gateways' changes (Iggy mode) and the snapshot timer. */
  start(): void {
    if (this.#timer !== undefined) return;
    const every = this.#opts.pollIntervalMs > 0 ? this.#opts.pollIntervalMs : 60_000;
    this.#timer = setInterval(() => {
      const read = this.#opts.pollIntervalMs > 0 ? this.sync() : Promise.resolve(true);
      read.then((ok) => ok && this.#maybeSnapshot());
    }, every);
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** Ends the reads and waits for a snapshot being written. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#snapshotting;
  }

  /**
   * Reads the records written since the last read (one read at a time, shared by callers:
   * {@link coalesced}); false when the log cannot answer.
   */
  readonly sync: () => Promise<boolean> = coalesced(() => this.#syncOnce());

  /**
   * Makes `message` (a retained PUBLISH's envelope) `topic`'s retained message, or clears it
   * (an empty payload): appends the change and reads it back. Resolves with null when done, or
   * why it was refused (the bounds; the message is then not retained). Rejects when the log
   * fails (nothing retained; the device's retry sets it).
   */
  async put(topic: string, message: OutgoingMessage): Promise<RetainedRoom> {
    if (message.headers.get(H_EMPTY) !== "true") {
      const why = this.set.room(topic, entryOf(topic, message, 0).bytes);
      if (why !== null) return why;
    }
    if (!this.#loaded && !(await this.load())) {
      throw new Error("retained messages are unavailable (the log did not answer)");
    }
    await this.#backend.append({ ...this.#address, messages: [message] });
    await this.sync();
    this.#maybeSnapshot();
    return null;
  }

  /**
   * Clears the retained messages whose topic `gone` says no longer maps (a reload's new map),
   * with a clear record each, so a restart does not bring them back; their topics.
   */
  async dropWhere(gone: (topic: string) => boolean): Promise<string[]> {
    const topics = [...this.set.entries()].map((e) => e.topic).filter(gone);
    await this.#appendAll(topics.map((t) => envelope(t, new Uint8Array(0), 0, "", 0, true)));
    if (topics.length > 0) await this.sync();
    return topics;
  }

  /**
   * The retained messages `filter` matches that have not expired, as stored messages, each
   * made when reached: a subscriber's burst holds one at a time, not a copy of the set.
   */
  *matching(filter: string): Generator<StoredMessage> {
    for (const e of this.set.matching(filter)) {
      const m = messageOf(e);
      if (expired(m, this.#now() * 1000)) this.set.delete(e.topic);
      else yield m;
    }
  }

  async #syncOnce(): Promise<boolean> {
    if (!this.#loaded) return await this.load();
    try {
      await this.#read((m) => this.#applyLive(m));
      return true;
    } catch (err) {
      this.#logger.limited("warn", "Reading retained messages failed", { error: err });
      return false;
    }
  }

  async #ensureTopic(): Promise<void> {
    const { stream, topic } = this.#opts;
    if (await this.#backend.getTopic(stream, topic) !== null) return;
    // The embedded log: no retention by age (its default would cut a snapshot older than it),
    // by size above the set's bound plus the changes between two snapshots. Iggy: the server's
    // defaults (it refuses a topic size under its segment size; its default expiry is none).
    const embedded = this.#backend.kind === "embedded";
    await this.#backend.createTopic(stream, topic, {
      partitions: 1,
      durable: true,
      ...(embedded
        ? {
          maxTopicBytes: 4 * this.#opts.maxBytes + 64 * 1024 * 1024,
          messageExpiryMicros: NEVER_MICROS,
        }
        : {}),
    });
  }

  /** The latest complete snapshot's marker, or null (none yet, or gone: read from the start). */
  async #latestSnapshot(): Promise<{ marker: SnapshotMarker; at: number } | null> {
    const offset = await this.#backend.getOffset(SNAPSHOT_CONSUMER, this.#address);
    if (offset === null) return null;
    const [m] = await this.#backend.poll(this.#address, offset, 1, NO_WAIT);
    const r = m?.offset === offset ? readRecord(m) : null;
    if (r?.kind === "marker") return { marker: r.marker, at: m.timestampMicros / 1000 };
    this.#logger.warn("Retained snapshot not found; reading the retained topic from its start", {
      offset,
    });
    return null;
  }

  /** Start-up: the snapshot's entries, then the changes after its base, in order. */
  async #readFromSnapshot(s: { marker: SnapshotMarker; at: number } | null): Promise<void> {
    this.#readFrom = s === null ? 0 : s.marker.base + 1;
    this.#changesSinceSnapshot = 0;
    this.#snapshotAtMs = s?.at ?? this.#now();
    const changes: StoredMessage[] = [];
    let entries = 0;
    await this.#read((m) => {
      const r = readRecord(m);
      if (s !== null && r.kind === "snapshot" && r.id === s.marker.id) {
        entries++;
        this.#keep(r.entry);
      } else if (r.kind === "set" || r.kind === "clear") changes.push(m);
      else if (r.kind === "malformed") this.#malformed(m);
    });
    if (s !== null && entries !== s.marker.count) {
      this.#logger.warn("Retained snapshot incomplete", {
        expected: s.marker.count,
        read: entries,
      });
    }
    for (const m of changes) this.#applyLive(m);
    this.lastLoad.snapshotEntries = entries;
    this.lastLoad.changes = changes.length;
    this.#logger.info("Retained messages loaded", {
      topics: this.set.size,
      bytes: this.set.bytes,
      snapshot_entries: entries,
      changes: changes.length,
    });
  }

  async #read(visit: (m: StoredMessage) => void): Promise<void> {
    await readToEnd(this.#backend, this.#address, this.#readFrom, READ_BATCH, (m) => {
      visit(m);
      this.#readFrom = m.offset + 1; // a failed poll resumes after what was applied
    });
  }

  /** Appends `messages` to the record topic in batches, in order. */
  async #appendAll(messages: OutgoingMessage[]): Promise<void> {
    for (let i = 0; i < messages.length; i += SNAPSHOT_BATCH) {
      await this.#backend.append({
        ...this.#address,
        messages: messages.slice(i, i + SNAPSHOT_BATCH),
      });
    }
  }

  /** One record read after start: changes apply in order; snapshots restate (skipped). */
  #applyLive(m: StoredMessage): void {
    const r = readRecord(m);
    switch (r.kind) {
      case "set":
        this.#changesSinceSnapshot++;
        return this.#keep(r.entry);
      case "clear":
        this.#changesSinceSnapshot++;
        this.set.delete(r.topic);
        return;
      case "marker":
        this.#changesSinceSnapshot = 0;
        this.#snapshotAtMs = m.timestampMicros / 1000;
        if (this.#writing?.id === r.marker.id) this.#writing.marker = m.offset;
        return;
      case "snapshot":
        return;
      case "malformed":
        return this.#malformed(m);
    }
  }

  #keep(e: RetainedEntry): void {
    if (this.set.put(e)) return;
    this.counters.overBound++;
    this.#logger.limited("warn", "Retained message not kept: over its bound", {
      topic: e.topic,
      reason: this.set.room(e.topic, e.bytes),
    });
  }

  #malformed(m: StoredMessage): void {
    this.counters.malformed++;
    this.#logger.limited("warn", "Skipping a malformed retained record", { offset: m.offset });
  }

  #due(): boolean {
    return this.#loaded && (
      this.#changesSinceSnapshot > Math.max(SNAPSHOT_MIN_CHANGES, this.set.size) ||
      (this.set.size > 0 && this.#now() - this.#snapshotAtMs > SNAPSHOT_MAX_AGE_MS)
    );
  }

  #maybeSnapshot(): void {
    if (this.#due()) this.#snapshotting = this.#snapshot();
  }

  /**
   * Writes a snapshot when one is due, one at a time ({@link coalesced}: a call while one is
   * written runs once more after it, and finds none due, the marker read back having reset
   * the count).
   */
  readonly #snapshot = coalesced(async () => {
    if (!this.#due()) return;
    try {
      await this.#writeSnapshot();
    } catch (err) {
      this.#logger.limited("warn", "Writing a retained snapshot failed", { error: err });
    } finally {
      this.#writing = null;
    }
  });

  async #writeSnapshot(): Promise<void> {
    const nowMicros = this.#now() * 1000;
    const base = this.#readFrom - 1;
    const id = crypto.randomUUID();
    const restated: OutgoingMessage[] = [];
    for (const e of this.set.entries()) {
      const m = messageOf(e);
      if (!expired(m, nowMicros)) restated.push(snapshotRecord(id, e, m));
    }
    this.#writing = { id, marker: null };
    const marker = markerRecord({ id, base, count: restated.length });
    const receipt = await this.#backend.append({ ...this.#address, messages: [marker] });
    await this.#appendAll(restated);
    await this.sync();
    const at = receipt.baseOffset ?? this.#writing.marker;
    if (at === null) throw new Error("the snapshot's marker was not read back");
    await this.#backend.storeOffset(SNAPSHOT_CONSUMER, this.#address, at);
    this.#logger.info("Retained snapshot written", { entries: restated.length, marker: at });
  }
}

/** Whether a retained message's MQTT 5 Message Expiry has passed. */
function expired(m: StoredMessage, nowMicros: number): boolean {
  const interval = storedExpiry(m.headers), from = wallClock.correctedMicros(m.timestampMicros);
  return interval !== null && from + interval * 1_000_000 <= nowMicros;
}
