/**
 * What `/metrics` and the status page show of shared subscriptions: per group with members
 * connected, its members, its lag (QoS 1/2 copies dealt to its members and not yet acknowledged,
 * plus what a catch-up after a hand-over still has to deal) and, in Iggy mode, the partitions
 * this gateway deals to it. Parked groups (no member connected) are counted only: what they miss
 * is in the log, behind their stored position.
 *
 * @module
 */
import type { ClientQueue } from "./client_queue.ts";
import type { ShareGroups } from "./share_groups.ts";
import type { ShareSpread } from "./share_spread.ts";

/** One connected share group's figures. */
export interface ShareGroupStats {
  /** `<group>/<filter>`. */
  readonly group: string;
  readonly members: number;
  readonly lag: number;
  /** Partitions the log's consumer group gives this gateway; null: every one (embedded). */
  readonly partitions: number | null;
}

/** Every connected group's figures (O(members × their window) per call: on scrape only). */
export function shareGroupStats(
  shares: ShareGroups<ClientQueue>,
  spread: ShareSpread | null,
): ShareGroupStats[] {
  const out: ShareGroupStats[] = [];
  for (const g of shares.connected()) {
    let lag = spread?.behind(g) ?? 0;
    for (const s of g.members) lag += s.client.unsettledOf(g);
    out.push({
      group: g.key,
      members: g.members.length,
      lag,
      partitions: g.owned === undefined ? null : g.owned.size,
    });
  }
  return out;
}
