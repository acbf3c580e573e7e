/**
 * A share group's catch-up on a partition it was just given (`share_spread.ts`): the messages
 * between the group's stored position and the shared reader, read from the log and dealt to the
 * group's members as the reader deals live ones (round robin, a full member passed over), then
 * handed to the reader. Until it hands over, the reader gives the group nothing of this
 * partition, so nothing is dealt twice on this gateway.
 *
 * @module
 */
import { openEnvelope } from "../log/envelope.ts";
import type { LogBackend, StoredMessage } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { filterMatches } from "../mapping/mod.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "./client_queue.ts";
import { AckLedger } from "./ledger.ts";
import type { SharedReader } from "./reader.ts";
import { type ShareGroup, type Triple, tripleKey } from "./registry.ts";
import { expiryLeft } from "./out_v5.ts";
import { deliverCopies, sharedTarget } from "./route.ts";
import { finishTargets } from "./targets.ts";
import { BehindPolls, sleep, WAIT_MS } from "./catch_up.ts";

/** What a group catch-up needs of delivery. */
export interface GroupCatchUpDeps {
  readonly backend: LogBackend;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly pollBatch: number;
  readonly maxClientBytes: number;
  reader(key: string): SharedReader | undefined;
  evict(q: ClientQueue, reason: string): void;
}

/** One group's backlog on one triple. */
export class GroupCatchUp {
  readonly key: string;
  readonly ledger: AckLedger;
  /** Next offset to read: everything before it was dealt or skipped. */
  position: number;
  /** Messages dealt (handed over from another gateway: at least once). */
  dealt = 0;
  #cancelled = false;
  readonly #group: ShareGroup<ClientQueue>;
  readonly #triple: Triple;
  readonly #deps: GroupCatchUpDeps;
  readonly #served = new Set<SpanContext>();

  constructor(
    group: ShareGroup<ClientQueue>,
    triple: Triple,
    from: number,
    deps: GroupCatchUpDeps,
  ) {
    this.key = tripleKey(triple);
    this.ledger = new AckLedger(from - 1);
    this.position = from;
    this.#group = group;
    this.#triple = triple;
    this.#deps = deps;
  }

  /** The partition was taken away again, or the group ended: stop where it is. */
  cancel(): void {
    this.#cancelled = true;
  }

  /**
   * Deals until it reaches the shared reader, then hands the partition to it (the group owns it
   * from there) in the same turn: a batch the reader routed in between would go to nobody.
   * True when it did.
   */
  async run(): Promise<boolean> {
    const d = this.#deps;
    const polls = new BehindPolls(d, this.#triple, this.key, "Share group catch-up poll failed");
    while (!this.#cancelled && this.#group.members.length > 0) {
      const reader = d.reader(this.key);
      if (reader === undefined) return false;
      if (this.position >= reader.position) {
        this.#group.owned?.add(this.key);
        return true;
      }
      if (!this.#hasRoom()) {
        await sleep(WAIT_MS);
        continue;
      }
      const n = Math.min(d.pollBatch, reader.position - this.position);
      const batch = await polls.next(this.position, n);
      if (batch === null) continue;
      if (this.#cancelled) return false;
      if (batch.length === 0) {
        this.position = reader.position; // removed by retention meanwhile
        continue;
      }
      this.position = this.#dealWithinRoom(batch);
    }
    return false;
  }

  /**
   * Deals the batch while some member has room (the first message always goes); returns the
   * offset to read next. As in `catch_up.ts`: a poll of large messages dealt at once would
   * pass the members' caps and evict them; the rest is read again.
   */
  #dealWithinRoom(batch: StoredMessage[]): number {
    for (let i = 0; i < batch.length; i++) {
      if (i > 0 && !this.#hasRoom()) return batch[i].offset;
      this.#deal(batch[i]);
    }
    return batch[batch.length - 1].offset + 1;
  }

  /** Some member has room: a group whose members all lag does not read ahead. */
  #hasRoom(): boolean {
    const half = this.#deps.maxClientBytes / 2;
    return this.#group.members.some((s) =>
      s.client.queuedBytes < half && s.client.waiting < this.#deps.pollBatch
    );
  }

  /** One message to one member whose filter matches it (as `Router` deals a live one). */
  #deal(m: StoredMessage): void {
    const view = openEnvelope(m);
    const left = view === null ? null : expiryLeft(m);
    const eligible = view === null || (left !== null && left <= 0)
      ? []
      : this.#group.members.filter((s) =>
        s.startOffsets.has(this.key) && filterMatches(s.match, view.topic)
      );
    if (eligible.length === 0) {
      this.ledger.record(m.offset, 0);
      return;
    }
    const d = this.#deps;
    const targets = finishTargets(
      [sharedTarget(this.#group, eligible, m)],
      m,
      view!,
      left,
      d.metrics,
    );
    const entry = this.ledger.record(m.offset, targets.filter((t) => t.qos > 0).length);
    if (targets.length === 0) return;
    this.dealt++;
    d.metrics.routed.inc();
    deliverCopies(targets, view!, this, entry, this.#served, d.metrics, d.evict, m);
    this.#served.clear();
  }
}
