/**
 * `check` in forward mode: the forward plan. Which local topics (those in the store, and the
 * map's constant targets) go where upstream, what exists there and with how many partitions,
 * what the forwarder would create; read over the login `check_iggy.ts` made (none with
 * `--offline`: one line saying so).
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { OperatorError } from "../config/errors.ts";
import type { LogBackend } from "../log/port.ts";
import { type CompiledMap, constantTargets } from "../mapping/mod.ts";
import { openStore } from "./read.ts";

/** Lines of the forward plan (none when forwarding is off); `upstream` null: not logged in. */
export async function forwardPlanLines(
  config: GatewayConfig,
  map: CompiledMap,
  upstream: LogBackend | null,
): Promise<string[]> {
  const f = config.forward;
  if (!f.enabled) return [];
  const lines = [
    `forward: every message of the embedded log to Iggy at ${config.iggy.address} (protocol ${config.iggy.protocol}, user ${config.iggy.username}, TLS ${
      config.iggy.tls ? "on" : "off"
    })`,
    `forward: sends of up to ${f.batch_max_messages} messages / ${f.batch_max_bytes} bytes; store full (embedded.max_store_bytes ${config.embedded.max_store_bytes}): ${f.when_full}`,
  ];
  const targets = await localTargets(config, map);
  if (upstream === null) {
    lines.push("forward: upstream not checked (--offline)");
    for (const [name, n] of targets) lines.push(`forward: ${name} (${n} partitions)`);
    return lines;
  }
  for (const [name, n] of targets) {
    const [stream, topic] = name.split("/", 2);
    const there = await upstream.getTopic(stream, topic);
    if (there === null) {
      const how = config.log.auto_create_durability === "fsync" ? "fsync" : "server defaults";
      lines.push(
        `forward: ${name} (${n} partitions) → missing upstream: created with ${n} partitions, ${how}`,
      );
    } else {
      const same = there.partitions === n
        ? "partition p → p"
        : `partition p → p mod ${there.partitions}`;
      const disk = there.acksBeforeDisk ? "; WARNING acknowledges before its disk" : "";
      lines.push(
        `forward: ${name} (${n} partitions) → upstream ${there.partitions} partitions, ${same}${disk}`,
      );
    }
  }
  return lines;
}

/** `stream/topic` → local partitions: the store's topics, then the map's constant targets. */
async function localTargets(config: GatewayConfig, map: CompiledMap): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  try {
    const store = await openStore(config);
    try {
      for (const t of await store.listTopics()) out.set(`${t.stream}/${t.topic}`, t.partitions);
    } finally {
      await store.close();
    }
  } catch (e) {
    if (!(e instanceof OperatorError)) throw e; // no store yet: only the map's targets
  }
  for (const t of constantTargets(map)) {
    const name = `${t.stream}/${t.topic}`;
    if (!out.has(name)) out.set(name, config.log.auto_create_partitions);
  }
  return out;
}
