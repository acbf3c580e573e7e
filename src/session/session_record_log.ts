/**
 * The stored-session record topic as read and written: records appended (a failure logged), the
 * writes still in flight, and the reading of the records written since the last read, in offset
 * order, skipping this process's own (its memory is newer) and malformed ones (logged, counted).
 * Claims and releases (`claim_record.ts`, under their own header) go to the claim sink, this
 * process's own included: their order against other gateways' claims decides a takeover.
 *
 * @module
 */
import { type LogBackend, type OutgoingMessage, type PartitionAddress } from "../log/port.ts";
import type { StoredMessage } from "../log/port.ts";
import { readToEnd } from "../stored/read_to_end.ts";
import type { Logger } from "../observe/logger.ts";
import { type ParsedRecord, parseSessionRecord } from "../stored/session_record.ts";
import { H_CLAIM, parseClaim, type ParsedClaim } from "../stored/claim_record.ts";

/** Header naming the client id of a session record. */
export const H_SESSION = "mqtt.session";
/** Header naming the process that wrote a record: its own records never overwrite its memory. */
const H_WRITER = "mqtt.session_writer";
const READ_BATCH = 1000;

/** Where the records read go. */
export interface RecordSink {
  /** A record of `clientId`'s session (`r.kind` "session") or its tombstone ("deleted"). */
  record(clientId: string, r: Exclude<ParsedRecord, { kind: "malformed" }>, m: StoredMessage): void;
  /** Every record of another writer read, before it is applied. */
  counted(m: StoredMessage): void;
}

/** Where claims and releases read go (`session_claims.ts`). */
export interface ClaimSink {
  /** A claim or release on `clientId`; `own`: this process wrote it. */
  claim(clientId: string, c: Exclude<ParsedClaim, { kind: "unknown" }>, own: boolean): void;
}

/** Reads and writes one record topic for one process. */
export class SessionRecordLog {
  readonly #backend: LogBackend;
  readonly #address: PartitionAddress;
  readonly #logger: Logger;
  /** This process's writer id (records it wrote are older than its memory). */
  readonly #writer = crypto.randomUUID();
  /** Next record offset to read (records other gateways wrote are read before a resume). */
  #readFrom = 0;
  #malformed = 0;
  readonly #writes = new Set<Promise<void>>();
  /** Where claims go; null: claims are passed over (no other gateway shares the log). */
  claims: ClaimSink | null = null;

  constructor(backend: LogBackend, address: PartitionAddress, logger: Logger) {
    this.#backend = backend;
    this.#address = address;
    this.#logger = logger;
  }

  /** Records skipped as malformed since start (a foreign or damaged record). */
  get malformed(): number {
    return this.#malformed;
  }

  /** The message that records `record` for `clientId` (a claim's: `header` {@link H_CLAIM}). */
  message(clientId: string, record: unknown, header = H_SESSION): OutgoingMessage {
    return {
      payload: new TextEncoder().encode(JSON.stringify(record)),
      headers: new Map([[header, clientId], [H_WRITER, this.#writer]]),
    };
  }

  /** Appends `clientId`'s record; resolves true once stored, false when that failed (logged). */
  write(clientId: string, record: unknown, header = H_SESSION): Promise<boolean> {
    const messages = [this.message(clientId, record, header)];
    const p = this.#backend.append({ ...this.#address, messages }).then(() => true, (err) => {
      this.#logger.limited("warn", "Writing a stored session failed", {
        client_id: clientId,
        error: err,
      });
      return false;
    });
    const settled = p.then(() => {}).finally(() => this.#writes.delete(settled));
    this.#writes.add(settled);
    return p;
  }

  /** Resolves when the writes asked so far are answered. */
  async written(): Promise<void> {
    await Promise.all([...this.#writes]);
  }

  /** Whether a write is in flight. */
  get writing(): boolean {
    return this.#writes.size > 0;
  }

  /** Reads the records written since the last read into `sink`. */
  async readTail(sink: RecordSink): Promise<void> {
    // Each record read moves #readFrom on at once: a failed poll resumes after it.
    await readToEnd(this.#backend, this.#address, this.#readFrom, READ_BATCH, (m) => {
      // One bad record must not stop the reading: it would be read (and fail) forever.
      try {
        this.#apply(m, sink);
      } catch (err) {
        this.#skipMalformed(m, err);
      }
      this.#readFrom = m.offset + 1;
    });
  }

  #apply(m: StoredMessage, sink: RecordSink): void {
    const claimed = m.headers.get(H_CLAIM);
    if (claimed !== undefined) return this.#claim(claimed, m);
    const clientId = m.headers.get(H_SESSION);
    if (clientId === undefined || m.headers.get(H_WRITER) === this.#writer) return;
    sink.counted(m);
    const r = parseSessionRecord(new TextDecoder().decode(m.payload));
    if (r.kind === "malformed") return this.#skipMalformed(m);
    sink.record(clientId, r, m);
  }

  /** A claim or release, parsed only where claims are watched; a later shape is passed over. */
  #claim(clientId: string, m: StoredMessage): void {
    if (this.claims === null) return;
    const c = parseClaim(new TextDecoder().decode(m.payload));
    if (c.kind !== "unknown") {
      this.claims.claim(clientId, c, m.headers.get(H_WRITER) === this.#writer);
    }
  }

  #skipMalformed(m: StoredMessage, err?: unknown): void {
    this.#malformed++;
    this.#logger.limited("warn", "Skipping a malformed stored-session record", {
      offset: m.offset,
      ...(err === undefined ? {} : { error: err }),
    });
  }
}
