/**
 * A share group's catch-up on a partition it was just given (`spread.ts`): the messages
 * between the group's stored position and the shared reader, read from the log and dealt to the
 * group's members as the reader deals live ones (round robin, a full member passed over), then
 * handed to the reader. Until it hands over, the reader gives the group nothing of this
 * partition, so nothing is dealt twice on this gateway. Paced like a client's catch-up
 * (`pacing.ts`): it reads ahead what the roomiest member's queue can hold, and deals a message
 * only to a member with room for it, waiting for one to drain when none has.
 *
 * @module
 */
import { openEnvelope } from "../../stored/envelope.ts";
import type { LogBackend, StoredMessage } from "../../log/port.ts";
import type { Logger } from "../../observe/logger.ts";
import type { GatewayMetrics } from "../../observe/gateway_metrics.ts";
import { filterMatches } from "../../mapping/mod.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "../client_queue.ts";
import { AckLedger } from "../ledger.ts";
import type { SharedReader } from "../reader.ts";
import { type ShareGroup, type Subscription, type Triple, tripleKey } from "../registry.ts";
import { expiryLeft } from "../out_v5.ts";
import { deliverCopies, sharedTarget } from "../route.ts";
import { finishTargets } from "../targets.ts";
import { BehindPolls } from "../catch_up.ts";
import { copiesBytes, drained, ReadAhead, roomInAny } from "../pacing.ts";

/** What a group catch-up needs of delivery. */
export interface GroupCatchUpDeps {
  readonly backend: Pick<LogBackend, "poll">;
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
    const ahead = new ReadAhead(d.maxClientBytes, d.pollBatch);
    let holder: ClientQueue | undefined; // the member whose queue holds the read-ahead
    try {
      while (!this.#cancelled && this.#group.members.length > 0) {
        const reader = d.reader(this.key);
        if (reader === undefined) return false;
        if (this.position >= reader.position) {
          this.#group.owned?.add(this.key);
          return true;
        }
        if (holder !== undefined) ahead.release(holder);
        holder = this.#roomiest();
        const n = ahead.reserve(holder, reader.position - this.position);
        if (n === 0) {
          await drained(holder);
          continue;
        }
        const batch = await polls.next(this.position, n);
        if (batch === null) continue;
        if (this.#cancelled) return false;
        ahead.polled(holder, batch);
        if (batch.length === 0) this.position = reader.position; // removed by retention meanwhile
        for (const m of batch) {
          const dealt = await this.#deal(m);
          if (this.#cancelled) return false;
          if (!dealt) break; // its members left while it waited: read it again
          ahead.offered(holder, m);
          this.position = m.offset + 1;
        }
      }
      return false;
    } finally {
      if (holder !== undefined) ahead.release(holder);
    }
  }

  /** The member whose queue has the most room: a group whose members all lag reads nothing. */
  #roomiest(): ClientQueue {
    let best = this.#group.members[0].client;
    for (const s of this.#group.members) {
      const q = s.client;
      if (q.queuedBytes + q.readAhead < best.queuedBytes + best.readAhead) best = q;
    }
    return best;
  }

  /**
   * One message to one member whose filter matches it (as `Router` deals a live one), among
   * those with room for it; when none has, once one of them drains. False when every member
   * it could go to left meanwhile (it is not passed over).
   */
  async #deal(m: StoredMessage): Promise<boolean> {
    const view = openEnvelope(m);
    const left = view === null ? null : expiryLeft(m);
    const matching = (s: Subscription<ClientQueue>) =>
      s.startOffsets.has(this.key) && filterMatches(s.match, view!.topic);
    let eligible = view === null || (left !== null && left <= 0)
      ? []
      : this.#group.members.filter(matching);
    // Room for the copy at the largest its topic and payload make (no property block yet).
    const bytes = eligible.length === 0 ? 0 : copiesBytes([{ prefix: "", props: null }], view!);
    if (eligible.length > 0 && !eligible.some((s) => s.client.blockedBy(bytes) === null)) {
      await roomInAny(eligible.map((s) => s.client), bytes);
      if (this.#cancelled) return false;
      eligible = this.#group.members.filter(matching); // members may have come or gone
    }
    if (eligible.length === 0) {
      this.ledger.record(m.offset, 0);
      return true;
    }
    const ready = eligible.filter((s) => !s.client.closed && s.client.blockedBy(bytes) === null);
    if (ready.length === 0) return false;
    const d = this.#deps;
    const targets = finishTargets(
      [sharedTarget(this.#group, ready, m)],
      m,
      view!,
      left,
      d.metrics,
    );
    const entry = this.ledger.record(m.offset, targets.filter((t) => t.qos > 0).length);
    if (targets.length === 0) return true;
    this.dealt++;
    d.metrics.routed.inc();
    deliverCopies(targets, view!, this, entry, this.#served, d.metrics, d.evict, m);
    this.#served.clear();
    return true;
  }
}
