/**
 * Shared subscriptions `$share/<group>/<filter>` [MQTT-4.8.2] inside one gateway: the
 * subscriptions of one (group, filter) are the members of a share group; each message the
 * filter matches goes to one member, round robin over the members that may have it, passing over
 * a member whose in-flight window is full or whose queue is paused (a slow member never stalls
 * the group), and a QoS 1 or 2 copy left unacknowledged by a member that goes away is offered to
 * another member (`Delivery.detach`).
 *
 * @module
 */
import type { ShareGroup, Subscription } from "../registry.ts";

export type { ShareGroup };

/** A `$share/` filter read: its group and its topic filter, or why it is malformed. */
export type ShareFilter =
  | { readonly group: string; readonly filter: string }
  | { readonly problem: string };

const PREFIX = "$share/";

/** Reads a `$share/<group>/<filter>` filter; null when `filter` is no shared subscription. */
export function parseShare(filter: string): ShareFilter | null {
  if (!filter.startsWith(PREFIX)) return null;
  const rest = filter.slice(PREFIX.length);
  const slash = rest.indexOf("/");
  if (slash < 0) return { problem: "a $share filter is $share/<group>/<filter> [MQTT-4.8.2-2]" };
  const group = rest.slice(0, slash);
  if (group === "" || group.includes("+") || group.includes("#")) {
    return { problem: "a share name is not empty and has no + or # [MQTT-4.8.2-1]" };
  }
  const inner = rest.slice(slash + 1);
  if (inner === "") return { problem: "a $share filter needs a topic filter after its name" };
  return { group, filter: inner };
}

/** What routing asks of a member's client: may it take another copy now. */
export interface MemberClient {
  readonly full: boolean;
}

/** Every share group of the gateway. */
export class ShareGroups<C extends MemberClient> {
  readonly #groups = new Map<string, ShareGroup<C>>();
  /**
   * Groups with no member connected whose last member's session is stored: the group's position
   * per triple key (the first offset it has not settled), for the first member back [MQTT-4.8.2].
   */
  readonly #parked = new Map<string, Map<string, number>>();

  /** Groups with members connected. */
  get size(): number {
    return this.#groups.size;
  }

  /** Groups waiting, with their position, for a member to come back. */
  get parked(): number {
    return this.#parked.size;
  }

  /** The groups with members connected. */
  connected(): IterableIterator<ShareGroup<C>> {
    return this.#groups.values();
  }

  /** Whether a group of this key exists (connected or parked). */
  has(key: string): boolean {
    return this.#groups.has(key) || this.#parked.has(key);
  }

  /** Members connected to the group `key`. */
  membersOf(key: string): number {
    return this.#groups.get(key)?.members.length ?? 0;
  }

  /** Which bound one more member of `key` would pass, or null. */
  full(key: string, maxGroups = Infinity, maxMembers = Infinity): string | null {
    if (!this.has(key)) return this.size + this.parked >= maxGroups ? "max_share_groups" : null;
    return this.membersOf(key) >= maxMembers ? "max_share_members" : null;
  }

  /** The group's last member left with a stored session: keep its position. */
  park(key: string, positions: Map<string, number>): void {
    if (!this.#groups.has(key)) this.#parked.set(key, positions);
  }

  /** A member joins a group with none connected: the position it was parked at, if any. */
  unpark(key: string): Map<string, number> | undefined {
    if (this.#groups.has(key)) return undefined;
    const p = this.#parked.get(key);
    this.#parked.delete(key);
    return p;
  }

  /** Adds `s` to the group `key` (made when it is the first member). */
  join(key: string, s: Subscription<C>): ShareGroup<C> {
    let g = this.#groups.get(key);
    if (g === undefined) this.#groups.set(key, g = { key, members: [], next: 0 });
    if (!g.members.includes(s)) g.members.push(s);
    return g;
  }

  /** Removes `s` from its group; the group ends with its last member. */
  leave(g: ShareGroup<C>, s: Subscription<C>): void {
    const i = g.members.indexOf(s);
    if (i >= 0) g.members.splice(i, 1);
    if (g.members.length === 0 && this.#groups.get(g.key) === g) this.#groups.delete(g.key);
  }
}

/**
 * The member of `eligible` (members of one group that may have the message) that gets it: the
 * next in turn that is not full, or the next in turn when all are.
 */
export function pickMember<C extends MemberClient>(
  g: ShareGroup<C>,
  eligible: readonly Subscription<C>[],
): Subscription<C> {
  const n = eligible.length;
  const start = g.next++ % n;
  if (g.next > 1_000_000_000) g.next = 0;
  for (let k = 0; k < n; k++) {
    const s = eligible[(start + k) % n];
    if (!s.client.full) return s;
  }
  return eligible[start];
}
