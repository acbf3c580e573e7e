/**
 * What `/metrics` and the status page show of shared subscriptions: per group with members
 * connected, its members, its lag (QoS 1/2 copies dealt to its members and not yet acknowledged,
 * plus what a catch-up after a hand-over still has to deal) and, in Iggy mode, the partitions
 * this gateway deals to it. Parked groups (no member connected) are counted only: what they miss
 * is in the log, behind their stored position.
 *
 * @module
 */
import type { ClientQueue } from "../client_queue.ts";
import type { ShareGroups } from "./groups.ts";
import type { ShareSpread } from "./spread.ts";
import type { Metrics } from "../../observe/metrics.ts";

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

/** The share groups' gauges on `/metrics` (read at each scrape). */
export function shareGauges(
  registry: Metrics,
  shares: ShareGroups<ClientQueue>,
  spread: ShareSpread | null,
): void {
  registry.gauge(
    "mqtt_share_groups",
    "Shared subscription groups: with members connected, and waiting for one (parked)",
    () => [[{ state: "connected" }, shares.size], [{ state: "parked" }, shares.parked]],
  );
  registry.gauge(
    "mqtt_share_group_lag_messages",
    "Per share group with members connected: copies dealt and not yet acknowledged, plus what a hand-over's catch-up still has to deal",
    () => shareGroupStats(shares, spread).map((g) => [{ group: g.group }, g.lag]),
  );
  registry.gauge(
    "mqtt_share_members",
    "Members (subscriptions) of share groups with members connected",
    () => {
      let n = 0; // the members alone: no lag walk over their windows
      for (const g of shares.connected()) n += g.members.length;
      return n;
    },
  );
  registry.gauge(
    "mqtt_share_partitions_owned",
    "Iggy mode: partitions the log's consumer groups give this gateway's share groups",
    () => spread?.owned() ?? 0,
  );
}
