/**
 * The share spread over a consumer group that moves a partition to a joining member at once, as
 * Iggy 0.9 does for a partition nothing polled through the group (the gateway never does): the
 * gateway that lost it sees so only at its next sync, so the one given it holds it until then.
 * Sampled every 10 ms, no partition is dealt by two gateways at any time, and every one is
 * dealt by exactly one within three syncs of the join. A real Iggy's run of the same is
 * tests/e2e/iggy_share_spread_test.ts.
 */
import assert from "node:assert/strict";
import type { GroupMembership, LogBackend } from "../../log/port.ts";
import { Logger } from "../../observe/logger.ts";
import type { GatewayMetrics } from "../../observe/gateway_metrics.ts";
import type { ClientQueue } from "../client_queue.ts";
import type { SharedReader } from "../reader.ts";
import type { ShareGroup, Triple } from "../registry.ts";
import { ShareSpread, type SpreadDeps, SYNC_MS } from "./spread.ts";
import { waitFor } from "../../../tests/helpers/wait.ts";

const PARTITIONS = [0, 1, 2];

/**
 * One topic's consumer group as Iggy 0.9 keeps it: members in join order; a join moves the
 * excess of the over-assigned members to the joiner at once, a leave deals round robin again.
 */
class Group {
  readonly members: { id: string; parts: number[] }[] = [];

  join(id: string): void {
    if (this.members.some((m) => m.id === id)) return;
    const joiner = { id, parts: [] as number[] };
    this.members.push(joiner);
    const assigned = new Set(this.members.flatMap((m) => m.parts));
    joiner.parts.push(...PARTITIONS.filter((p) => !assigned.has(p))); // nobody's: to the joiner
    const share = Math.floor(PARTITIONS.length / this.members.length);
    while (joiner.parts.length < share) { // the excess of the most loaded, moved at once
      const most = this.members.reduce((x, y) => y.parts.length > x.parts.length ? y : x);
      if (most === joiner) break;
      joiner.parts.push(most.parts.pop()!);
    }
  }

  leave(id: string): void {
    const i = this.members.findIndex((m) => m.id === id);
    if (i < 0) return;
    this.members.splice(i, 1);
    for (const m of this.members) m.parts = [];
    PARTITIONS.forEach((p, k) => this.members[k % this.members.length]?.parts.push(p));
  }
}

/** One gateway's view of the shared group: its own membership. */
function membership(group: Group, id: string): GroupMembership {
  return {
    members: () => Promise.resolve(group.members.length),
    join: () => Promise.resolve(group.join(id)),
    assigned: () => Promise.resolve(group.members.find((m) => m.id === id)?.parts ?? null),
    leave: () => Promise.resolve(group.leave(id)),
  };
}

/** A gateway's spread whose readers are all at 0 (nothing behind: a gained partition is dealt). */
function gateway(group: Group, id: string) {
  const deps: SpreadDeps = {
    backend: {
      getOffset: () => Promise.resolve(null),
      storeOffset: () => Promise.resolve(),
      poll: () => Promise.resolve([]),
    } as unknown as LogBackend,
    groups: membership(group, id),
    logger: new Logger("error", () => {}),
    handedOver: () => {},
    metrics: {} as GatewayMetrics,
    pollBatch: 100,
    maxClientBytes: 1 << 20,
    reader: () => ({ position: 0 }) as SharedReader,
    evict: () => {},
  };
  const share: ShareGroup<ClientQueue> = { key: "workers/jobs/+", members: [], next: 0 };
  return { spread: new ShareSpread(deps), share };
}

const TRIPLES: Triple[] = PARTITIONS.map((partition) => ({ stream: "s", topic: "t", partition }));

Deno.test("share spread: a partition moved to a joining gateway is never dealt by two at once, and by one within three syncs", async () => {
  const group = new Group();
  const a = gateway(group, "a");
  const b = gateway(group, "b");
  let twice = 0;
  const sampler = setInterval(() => {
    const dealt = [...a.share.owned ?? [], ...b.share.owned ?? []];
    if (new Set(dealt).size < dealt.length) twice++;
  }, 10);
  try {
    await a.spread.start(a.share, TRIPLES, false); // the first member anywhere: a deals all three
    assert.equal(a.share.owned!.size, 3);
    const joined = performance.now();
    await b.spread.start(b.share, TRIPLES, false); // Iggy moves one partition to b at once
    assert.deepEqual(group.members.map((m) => m.parts.length), [2, 1]);
    await waitFor(
      () => a.share.owned!.size === 2 && b.share.owned!.size === 1,
      3 * SYNC_MS + 500,
      "two on a, one on b",
    );
    assert.ok(performance.now() - joined >= SYNC_MS, "b held the moved partition for a sync");
    assert.equal(twice, 0, "a partition was dealt by both gateways");
    // b leaves (stops): a deals all three again.
    await b.spread.stop();
    await waitFor(() => a.share.owned!.size === 3, 3 * SYNC_MS + 500, "all three on a");
    assert.equal(twice, 0);
  } finally {
    clearInterval(sampler);
    await a.spread.stop();
    await b.spread.stop();
  }
});
