/**
 * The `explain` command: where each MQTT topic goes, and what each filter reads, named down to
 * the partition. A topic resolves as a PUBLISH does (stream, Iggy topic, key, rule) and its
 * partition is the key's hash over the topic's partitions (the embedded store's count when the
 * topic exists, `log.auto_create_partitions` when it would be created); a wildcard filter
 * resolves as SUBSCRIBE does (`delivery/filter_triples.ts`, the same code): its targets under
 * the topic map, matched against the topics of the embedded store (opened read-only, so it
 * works beside a running gateway), bounded by `limits.max_triples_per_subscription`.
 *
 * @module
 */
import { ALL_GLOBAL_PERMISSIONS } from "../access/permissions.ts";
import type { GatewayConfig } from "../config/types.ts";
import { fileExists } from "../config/files.ts";
import { filterTriples } from "../delivery/filter_triples.ts";
import { parseShare } from "../delivery/share/groups.ts";
import { TopicCache } from "../log/topic_cache.ts";
import type { LogBackend } from "../log/port.ts";
import {
  type CompiledMap,
  type FilterTarget,
  isWildcardFilter,
  type NameSpec,
  partitionForKey,
  resolveFilter,
} from "../mapping/mod.ts";
// Not in mapping/mod.ts: the running gateway imports that and has no use for this.
import { explainJson } from "../mapping/explain.ts";
import { PublishPreparer } from "../session/publish.ts";
import { systemClock } from "../base/clock.ts";
import { openStore } from "./read.ts";

/** Where the partition counts and existing topics come from, or why there is none. */
type Store = { readonly backend: LogBackend } | { readonly none: string };

/** Prints one answer per topic or filter in `names` (`--json`: one object a line). */
export async function explain(
  map: CompiledMap,
  config: GatewayConfig,
  names: readonly string[],
  json: boolean,
  print: (line: string) => void,
): Promise<void> {
  const store = await storeOf(config);
  try {
    for (const name of names) {
      // A shared subscription's filter reads the topic after its $share/<group>/ prefix.
      const share = parseShare(name);
      const filter = share !== null && "filter" in share ? share.filter : name;
      const group = share !== null && "group" in share ? share.group : null;
      const answer = isWildcardFilter(filter)
        ? await explainFilter(map, config, store, filter)
        : await explainTopic(map, config, store, filter);
      const { topic: _, ...rest } = answer as Record<string, unknown>;
      const full = { topic: name, ...rest, ...(group === null ? {} : { share: group }) };
      print(json ? JSON.stringify(full) : textOf(full, group));
    }
  } finally {
    if ("backend" in store) await store.backend.close();
  }
}

async function storeOf(config: GatewayConfig): Promise<Store> {
  if (config.gateway.backend !== "embedded") {
    return { none: "Iggy mode: explain reads no topic from Iggy" };
  }
  if (!(await fileExists(config.embedded.path))) {
    return { none: `no embedded store at "${config.embedded.path}" yet` };
  }
  return { backend: await openStore(config) };
}

/** A topic: where a PUBLISH to it goes, with its partition. */
async function explainTopic(map: CompiledMap, config: GatewayConfig, store: Store, topic: string) {
  const e = explainJson(map, topic);
  const info = "backend" in store ? await store.backend.getTopic(e.stream, e.iggy_topic) : null;
  const partitions = info?.partitions ?? config.log.auto_create_partitions;
  const exists = info !== null ? true : "backend" in store ? false : null;
  return {
    ...e,
    partitions,
    partition: e.partition_key === null ? null : partitionForKey(e.partition_key, partitions),
    exists,
    ...("none" in store ? { note: store.none } : {}),
  };
}

/** A wildcard filter: the triples SUBSCRIBE would read, or why it would refuse it. */
async function explainFilter(
  map: CompiledMap,
  config: GatewayConfig,
  store: Store,
  filter: string,
) {
  const targets = resolveFilter(map, filter).map(targetJson);
  const max = config.limits.max_triples_per_subscription;
  if ("none" in store) return { filter: true, targets, max_triples: max, note: store.none };
  const topics = new TopicCache(store.backend, {
    autoCreate: false, // explain creates nothing
    create: { partitions: config.log.auto_create_partitions },
    ttlMs: 60_000,
    missTtlMs: 1_000,
    maxEntries: 10_000,
  }, systemClock);
  const preparer = new PublishPreparer({ current: map }, topics, false);
  const hidden = [
    { stream: config.session.store_stream, topic: config.session.store_topic },
    { stream: config.retained.stream, topic: config.retained.topic },
  ];
  const everyone = {
    username: "explain",
    permissions: { global: ALL_GLOBAL_PERMISSIONS, streams: new Map() },
  };
  const r = await filterTriples(
    { preparer, backend: store.backend, maxTriples: max, hidden },
    everyone,
    filter,
  );
  if (r.refused !== undefined) {
    return { filter: true, targets, max_triples: max, refused: r.refused, reason_code: r.code5 };
  }
  const triples = r.triples.sort((a, b) =>
    a.stream.localeCompare(b.stream) || a.topic.localeCompare(b.topic) || a.partition - b.partition
  );
  return { filter: true, targets, max_triples: max, triples };
}

function targetJson(t: FilterTarget) {
  return {
    rule: t.rule,
    stream: nameOf(t.stream),
    iggy_topic: nameOf(t.topic),
    partition_key: t.partitionKey,
  };
}

/** A name, or a pattern in plain words where it is one (`building_*`), else as a regex. */
function nameOf(n: NameSpec): string {
  if ("name" in n) return n.name;
  const plain = n.pattern.source.replace(/^\^|\$$/g, "").replace(/\.\*|\.\+|\[\^\/\]\+/g, "*");
  return /[\\()[\]{}|?+^$]/.test(plain) ? `/${n.pattern.source}/` : plain;
}

type Answer = Record<string, unknown> & { topic: string };

function textOf(a: Answer, group: string | null): string {
  const head = `${a.topic} → ${group === null ? "" : `share group "${group}": `}`;
  if (a.filter !== true) {
    const key = a.partition_key === null ? "(none: balanced)" : `"${a.partition_key}"`;
    const where = a.partition === null
      ? `every partition of ${a.partitions} (balanced)`
      : `partition ${a.partition} of ${a.partitions}`;
    const known = a.exists === false ? "; the topic does not exist yet" : "";
    return `${head}stream "${a.stream}", topic "${a.iggy_topic}", key ${key}, ${where} (${
      a.rule === null ? "default" : `rule ${a.rule}`
    }${known})${a.note ? ` [${a.note}: ${a.partitions} is log.auto_create_partitions]` : ""}`;
  }
  const targets = (a.targets as ReturnType<typeof targetJson>[]).map((t) =>
    `${t.rule === null ? "default" : `rule ${t.rule}`}: ${t.stream} / ${t.iggy_topic}${
      t.partition_key === null ? "" : ` key ${t.partition_key}`
    }`
  ).join("; ");
  const lines = [`${head}a filter over ${targets}`];
  if (a.note) lines.push(`  (${a.note}: no existing topic to match)`);
  else if (a.refused) {
    lines.push(
      `  SUBSCRIBE would be refused (reason 0x${
        (a.reason_code as number).toString(16)
      }): ${a.refused}`,
    );
  } else {
    const triples = a.triples as { stream: string; topic: string; partition: number }[];
    lines.push(
      `  reads ${triples.length} triple(s) (at most ${a.max_triples}, limits.max_triples_per_subscription):`,
    );
    for (const t of triples) lines.push(`  ${t.stream} / ${t.topic} partition ${t.partition}`);
  }
  return lines.join("\n");
}
