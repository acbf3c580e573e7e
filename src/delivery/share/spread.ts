/**
 * Shared subscriptions across gateways on one Iggy: each gateway with members of a
 * group joins the log's consumer group of every topic the filter reads, and deals to its members
 * only the partitions the log gives it; the others' members get the rest. When a gateway joins,
 * leaves or stops, the log deals the partitions again; a gateway given a partition starts the
 * group there from the group's stored position (a catch-up, `group_catch_up.ts`), so what the
 * previous owner had not settled is dealt again: at least once at the hand-over, counted in
 * `mqtt_share_handover_messages_total`.
 *
 * Iggy moves a partition at once when a member joins (the gateway never polls with the group, so
 * nothing of it is in flight for Iggy), and the member that lost it only sees so at its next sync:
 * a gateway given a partition another member may still deal holds it for {@link HANDOVER_HOLD_MS}
 * before dealing it, so that no partition is dealt by two gateways at once. A rebalance is
 * followed within three syncs: the loser stops at its next sync, the gainer sees the move at its
 * next one and deals the partition from the first one after the hold.
 *
 * The group's position is a named consumer's offsets (the group's log name), stored every sync
 * for each partition this gateway owns, only over the prefix its members have settled (the ack
 * ledger's rule), and once more when it leaves. A group that starts fresh (no member anywhere,
 * none of its members resuming a stored session) starts live, as inside one gateway.
 *
 * @module
 */
import type { GroupMembership, LogBackend } from "../../log/port.ts";
import type { Logger } from "../../observe/logger.ts";
import type { ClientQueue } from "../client_queue.ts";
import type { ShareGroup, Triple } from "../registry.ts";
import { tripleKey } from "../registry.ts";
import { utf8Length } from "../../base/utf8.ts";
import { GroupCatchUp, type GroupCatchUpDeps } from "./group_catch_up.ts";

/** How often each group's partitions are asked for and its position stored (ms). */
export const SYNC_MS = 500;

/**
 * How long a gateway holds a partition it was just given before dealing it: the previous owner
 * stops dealing it at its next sync, within SYNC_MS of the move.
 */
export const HANDOVER_HOLD_MS = SYNC_MS;

/** Bytes of a log group name at most (an Iggy name). */
const MAX_NAME_BYTES = 255;

/** What the spread needs besides the catch-ups' dependencies. */
export interface SpreadDeps extends GroupCatchUpDeps {
  /** The log: the catch-ups' polls, and the groups' stored positions. */
  readonly backend: LogBackend;
  readonly groups: GroupMembership;
  readonly logger: Logger;
  /** Counts messages dealt again after a hand-over. */
  readonly handedOver: (n: number) => void;
}

/** One group's share of the log on this gateway. */
interface Spread {
  readonly group: ShareGroup<ClientQueue>;
  readonly name: string;
  readonly triples: readonly Triple[];
  /** Partitions (triple keys) being caught up: the reader deals them to the group after. */
  readonly catchUps: Map<string, GroupCatchUp>;
  /** Position last stored per triple key (the first offset not settled). */
  readonly stored: Map<string, number>;
  /** Partitions given but held (their previous owner may still deal them): since when (ms). */
  readonly held: Map<string, number>;
  /** Start live, not from a stored position (a group that was nowhere). */
  fresh: boolean;
  ended: boolean;
  /** A sync is under way (the start's and the timer's must not both gain a partition). */
  syncing: boolean;
}

/** The log name of a share group: `mqtt-share/<group>/<filter>`, hashed when too long. */
export function groupLogName(key: string): string {
  const name = `mqtt-share/${key}`;
  if (utf8Length(name) <= MAX_NAME_BYTES) return name;
  let h = 0x811c9dc5; // FNV-1a: a stable short name for a long filter
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return `mqtt-share/${key.slice(0, 200)}#${(h >>> 0).toString(16)}`;
}

/** The share groups' partitions on this gateway. */
export class ShareSpread {
  readonly #deps: SpreadDeps;
  readonly #spreads = new Map<ShareGroup<ClientQueue>, Spread>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #syncing = false;
  /** Groups storing their position and leaving. */
  readonly #ending = new Set<Promise<void>>();

  constructor(deps: SpreadDeps) {
    this.#deps = deps;
  }

  /** Messages a group's catch-ups still have to deal before the reader takes over. */
  behind(group: ShareGroup<ClientQueue>): number {
    const sp = this.#spreads.get(group);
    let n = 0;
    for (const c of sp?.catchUps.values() ?? []) {
      n += Math.max(0, (this.#deps.reader(c.key)?.position ?? c.position) - c.position);
    }
    return n;
  }

  /** Partitions dealt to groups here (metrics). */
  owned(): number {
    let n = 0;
    for (const sp of this.#spreads.values()) n += sp.group.owned?.size ?? 0;
    return n;
  }

  /**
   * The group got its first member here (a group already started is left as it is). It deals
   * nothing until the log says which partitions are this gateway's; `resume`: a member resumed a
   * stored session or the group was parked.
   */
  async start(group: ShareGroup<ClientQueue>, triples: readonly Triple[], resume: boolean) {
    if (this.#spreads.has(group)) return;
    group.owned ??= new Set();
    const name = groupLogName(group.key);
    const sp: Spread = {
      group,
      name,
      triples,
      catchUps: new Map(),
      stored: new Map(),
      held: new Map(),
      fresh: !resume,
      ended: false,
      syncing: false,
    };
    this.#spreads.set(group, sp);
    this.#timer ??= setInterval(() => void this.#syncAll(), SYNC_MS);
    try {
      for (const [stream, topic] of topicsOf(triples)) {
        const g = this.#deps.groups;
        if (sp.fresh && await g.members(stream, topic, name) > 0) sp.fresh = false;
        await g.join(stream, topic, name);
        if (sp.ended) await g.leave(stream, topic, name); // its last member went meanwhile
      }
      await this.#sync(sp);
    } catch (err) {
      this.#deps.logger.limited("warn", "Share group join failed; retried", {
        group: group.key,
        error: err,
      });
    }
  }

  /** The group's last member here left: store its position, leave the log's group. */
  end(group: ShareGroup<ClientQueue>): Promise<void> {
    const sp = this.#spreads.get(group);
    if (sp === undefined) return Promise.resolve();
    this.#spreads.delete(group);
    sp.ended = true;
    for (const c of sp.catchUps.values()) c.cancel();
    if (this.#spreads.size === 0) this.#stopTimer();
    const p = this.#leave(sp).finally(() => this.#ending.delete(p));
    this.#ending.add(p);
    return p;
  }

  /** Gateway stop: every group stores its position and leaves (the others take over at once). */
  async stop(): Promise<void> {
    this.#stopTimer();
    for (const g of [...this.#spreads.keys()]) void this.end(g);
    await Promise.all([...this.#ending]);
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #syncAll(): Promise<void> {
    if (this.#syncing) return;
    this.#syncing = true;
    try {
      for (const sp of [...this.#spreads.values()]) {
        await this.#sync(sp).catch((err) =>
          this.#deps.logger.limited("warn", "Share group sync failed", {
            group: sp.group.key,
            error: err,
          })
        );
      }
    } finally {
      this.#syncing = false;
    }
  }

  /** Asks which partitions are this gateway's, follows the change, stores the position. */
  async #sync(sp: Spread): Promise<void> {
    if (sp.syncing) return;
    sp.syncing = true;
    try {
      await this.#follow(sp);
    } finally {
      sp.syncing = false;
    }
  }

  async #follow(sp: Spread): Promise<void> {
    const g = this.#deps.groups;
    const mine = new Set<string>();
    for (const [stream, topic] of topicsOf(sp.triples)) {
      let parts = await g.assigned(stream, topic, sp.name);
      if (parts === null) { // the membership connection was lost, and its memberships
        await g.join(stream, topic, sp.name);
        parts = await g.assigned(stream, topic, sp.name) ?? [];
      }
      for (const t of sp.triples) {
        if (t.stream === stream && t.topic === topic && parts.includes(t.partition)) {
          mine.add(tripleKey(t));
        }
      }
    }
    if (sp.ended) return;
    const owned = sp.group.owned!;
    for (const key of [...owned, ...sp.catchUps.keys()]) {
      if (mine.has(key)) continue;
      owned.delete(key); // dealt to another gateway now
      sp.catchUps.get(key)?.cancel();
      sp.catchUps.delete(key);
      sp.stored.delete(key);
    }
    for (const key of sp.held.keys()) if (!mine.has(key)) sp.held.delete(key);
    for (const t of sp.triples) {
      const key = tripleKey(t);
      if (!mine.has(key) || owned.has(key) || sp.catchUps.has(key) || this.#holds(sp, key)) {
        continue;
      }
      sp.held.delete(key);
      await this.#gain(sp, t, key);
    }
    sp.fresh = false;
    await this.#store(sp);
  }

  /**
   * Whether a partition given to this gateway is still held: another gateway may deal it until
   * its next sync. A group that was nowhere (fresh) has no other owner to wait for.
   */
  #holds(sp: Spread, key: string): boolean {
    if (sp.fresh) return false;
    const now = performance.now();
    const since = sp.held.get(key);
    if (since === undefined) sp.held.set(key, now);
    return since === undefined || now - since < HANDOVER_HOLD_MS;
  }

  /** A partition became this gateway's: from the group's stored position, or live. */
  async #gain(sp: Spread, t: Triple, key: string): Promise<void> {
    const reader = this.#deps.reader(key);
    if (reader === undefined) return;
    // Every partition dealt to the group has its position stored from the first sync on, but
    // one that was empty then (position 0, nothing to store): none stored means from 0.
    const stored = sp.fresh ? null : await this.#deps.backend.getOffset(sp.name, t);
    const from = sp.fresh ? reader.position : stored === null ? 0 : stored + 1;
    if (sp.ended) return;
    if (from >= reader.position) {
      sp.group.owned!.add(key);
      return;
    }
    const c = new GroupCatchUp(sp.group, t, from, this.#deps);
    sp.catchUps.set(key, c);
    // Reaching the reader, the catch-up itself hands the partition over (`owned`).
    c.run().then(() => {
      if (sp.catchUps.get(key) === c) sp.catchUps.delete(key);
    }, (err) => this.#deps.logger.warn("Share group catch-up failed", { key, error: err }))
      .finally(() => this.#deps.handedOver(c.dealt));
  }

  /** Stores, per partition this gateway deals, the first offset its members have not settled. */
  async #store(sp: Spread): Promise<void> {
    const lowest = new Map<string, number>();
    for (const s of sp.group.members) {
      for (const [k, o] of s.client.lowestUnsettled()) {
        if (o < (lowest.get(k) ?? Infinity)) lowest.set(k, o);
      }
    }
    for (const t of sp.triples) {
      const key = tripleKey(t);
      const c = sp.catchUps.get(key);
      const reader = this.#deps.reader(key);
      if (reader === undefined || (c === undefined && !sp.group.owned!.has(key))) continue;
      const settled = Math.min(c?.position ?? reader.position, lowest.get(key) ?? Infinity);
      if (settled <= 0 || settled === sp.stored.get(key)) continue;
      await this.#deps.backend.storeOffset(sp.name, t, settled - 1);
      sp.stored.set(key, settled);
    }
  }

  async #leave(sp: Spread): Promise<void> {
    try {
      await this.#store(sp);
    } catch (err) {
      this.#deps.logger.warn("Share group position not stored", {
        group: sp.group.key,
        error: err,
      });
    }
    sp.group.owned!.clear();
    for (const [stream, topic] of topicsOf(sp.triples)) {
      await this.#deps.groups.leave(stream, topic, sp.name).catch((err) =>
        this.#deps.logger.limited("warn", "Share group leave failed", {
          group: sp.group.key,
          error: err,
        })
      );
    }
  }
}

/** The distinct (stream, topic) pairs of `triples`. */
function topicsOf(triples: readonly Triple[]): [string, string][] {
  const seen = new Map<string, [string, string]>();
  for (const t of triples) seen.set(`${t.stream}\u0000${t.topic}`, [t.stream, t.topic]);
  return [...seen.values()];
}
