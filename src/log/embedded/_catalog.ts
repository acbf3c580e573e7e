/**
 * The in-memory catalog of topics: ids, partition counts, retention settings, from the tables.
 * Offsets are the message log's (_message_log.ts).
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import type { CreateTopicOptions, TopicInfo } from "../port.ts";
import { type PartitionFloor, partitionKey } from "./_message_log.ts";

/** One topic with its per-partition counters. Arrays are indexed by partition. */
export interface TopicState {
  readonly id: number;
  readonly stream: string;
  readonly topic: string;
  readonly partitions: number;
  /** Topic's own retention by age, µs; 0 = the backend default. */
  readonly messageExpiryMicros: number;
  /** Topic's own retention by size, bytes; 0 = the backend default. */
  readonly maxTopicBytes: number;
}

interface TopicRow {
  id: number;
  stream: string;
  topic: string;
  partitions: number;
  message_expiry_micros: number;
  max_topic_bytes: number;
}

interface FloorRow {
  topic_id: number;
  partition: number;
  start_offset: number;
  next_offset: number;
}

const TOPIC_SELECT = `SELECT t.id, s.name AS stream, t.name AS topic, t.partitions,
  t.message_expiry_micros, t.max_topic_bytes FROM topics t JOIN streams s ON s.id = t.stream_id`;

/** Topics by stream name, then topic name (nested maps: no key string built per append). */
export class Catalog {
  readonly #db: DatabaseSync;
  readonly #streams = new Map<string, Map<string, TopicState>>();
  readonly #byId = new Map<number, TopicState>();

  constructor(db: DatabaseSync) {
    this.#db = db;
  }

  /** Reads every topic and partition counter from the tables. */
  load(): void {
    this.#streams.clear();
    this.#byId.clear();
    for (const row of this.#db.prepare(TOPIC_SELECT).all() as unknown as TopicRow[]) {
      this.#put(this.#stateOf(row));
    }
  }

  /** The topic, or undefined when its stream or itself is missing. */
  get(stream: string, topic: string): TopicState | undefined {
    return this.#streams.get(stream)?.get(topic);
  }

  /** The topic with this numeric id (the log's records name topics by id). */
  byId(id: number): TopicState | undefined {
    return this.#byId.get(id);
  }

  /** Re-reads one topic from the tables (a read-only store sees topics the writer adds). */
  reload(stream: string, topic: string): TopicState | undefined {
    const row = this.#db.prepare(`${TOPIC_SELECT} WHERE s.name = ? AND t.name = ?`).get(
      stream,
      topic,
    ) as unknown as TopicRow | undefined;
    if (!row) return undefined;
    const state = this.#stateOf(row);
    this.#put(state);
    return state;
  }

  /** Every topic, for retention. */
  *topics(): IterableIterator<TopicState> {
    for (const topics of this.#streams.values()) yield* topics.values();
  }

  /**
   * Creates the stream if missing and the topic if missing, in one transaction; an existing
   * topic is returned as it is (its real partition count wins over `options`). A new topic's
   * id is at least `minId`: the message log names topics by id, and may hold records of an id
   * this file never got (a store restored from copies taken at different times).
   */
  create(
    stream: string,
    topic: string,
    options: CreateTopicOptions,
    nowMicros: number,
    minId = 1,
  ): TopicState {
    const existing = this.get(stream, topic);
    if (existing) return existing;
    const db = this.#db;
    db.exec("BEGIN IMMEDIATE");
    try {
      db.prepare("INSERT OR IGNORE INTO streams (name, created_micros) VALUES (?, ?)").run(
        stream,
        nowMicros,
      );
      const { id: streamId } = db.prepare("SELECT id FROM streams WHERE name = ?").get(
        stream,
      ) as { id: number };
      const { lastInsertRowid } = db.prepare(
        `INSERT INTO topics (id, stream_id, name, partitions, message_expiry_micros,
           max_topic_bytes, created_micros)
         VALUES (max(?, coalesce((SELECT max(id) FROM topics), 0) + 1), ?, ?, ?, ?, ?, ?)`,
      ).run(
        minId,
        streamId,
        topic,
        options.partitions,
        options.messageExpiryMicros ?? 0,
        options.maxTopicBytes ?? 0,
        nowMicros,
      );
      const insertPartition = db.prepare(
        "INSERT INTO partitions (topic_id, partition, start_offset, next_offset) VALUES (?, ?, 0, 0)",
      );
      for (let p = 0; p < options.partitions; p++) insertPartition.run(lastInsertRowid, p);
      db.exec("COMMIT");
    } catch (e) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw e;
    }
    return this.reload(stream, topic)!;
  }

  #stateOf(row: TopicRow): TopicState {
    return {
      id: row.id,
      stream: row.stream,
      topic: row.topic,
      partitions: row.partitions,
      messageExpiryMicros: row.message_expiry_micros,
      maxTopicBytes: row.max_topic_bytes,
    };
  }

  #put(state: TopicState): void {
    let topics = this.#streams.get(state.stream);
    if (!topics) this.#streams.set(state.stream, topics = new Map());
    topics.set(state.topic, state);
    this.#byId.set(state.id, state);
  }
}

/** Every partition's stored floors (see the `partitions` table), keyed by partitionKey(). */
export function loadFloors(db: DatabaseSync): Map<string, PartitionFloor> {
  const floors = new Map<string, PartitionFloor>();
  const rows = db.prepare("SELECT topic_id, partition, start_offset, next_offset FROM partitions")
    .all() as unknown as FloorRow[];
  for (const r of rows) {
    floors.set(partitionKey(r.topic_id, r.partition), {
      start: r.start_offset,
      next: r.next_offset,
    });
  }
  return floors;
}

/** The port's view of a topic. */
export function topicInfo(state: TopicState): TopicInfo {
  const { stream, topic, partitions, messageExpiryMicros: age } = state;
  return { stream, topic, partitions, ...(age > 0 ? { messageExpiryMicros: age } : {}) };
}
