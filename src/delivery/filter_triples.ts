/**
 * S2–S3 for one filter: the triples whose messages can match it, each with the poll right.
 * An exact filter resolves like a PUBLISH topic (one target; a keyed rule gives one partition).
 * A wildcard filter is resolved against the topic map (`mapping/filter_resolve.ts`) into
 * targets, existing targets are matched against name patterns (`LogBackend.listTopics`), and
 * the result is bounded by `limits.max_triples_per_subscription`.
 *
 * @module
 */
import { canPoll } from "../access/permissions.ts";
import {
  checkResolution,
  type FilterTarget,
  isWildcardFilter,
  type NameSpec,
  partitionForKey,
  resolveFilter,
} from "../mapping/mod.ts";
import type { LogBackend, Principal, TopicInfo } from "../log/port.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { Triple } from "./registry.ts";

/**
 * The triples of a filter, or why it is refused and the MQTT 5 SUBACK reason code that says so
 * (0x87 no poll right, 0x8F no valid target, 0x97 over the triple bound, 0x80 otherwise).
 */
export type FilterTriples =
  | { readonly triples: Triple[]; readonly refused?: undefined }
  | {
    readonly refused: string;
    readonly code5: number;
    /** No retry can change it (invalid, no poll right, no target): a stored session drops it. */
    readonly permanent?: boolean;
    readonly triples?: undefined;
  };

/** What resolving a filter needs. */
export interface FilterTripleDeps {
  readonly preparer: PublishPreparer;
  readonly backend: LogBackend;
  readonly maxTriples: number;
  /** Targets a wildcard never resolves to (the gateway's own record topics). */
  readonly hidden: readonly { readonly stream: string; readonly topic: string }[];
}

/** The triples of `filter` the principal may poll. */
export async function filterTriples(
  deps: FilterTripleDeps,
  principal: Principal,
  filter: string,
): Promise<FilterTriples> {
  if (!isWildcardFilter(filter)) return await exactTriples(deps, principal, filter);
  const targets = resolveFilter(deps.preparer.map, filter);
  let listed: TopicInfo[] | null = null;
  const list = async () => listed ??= await deps.backend.listTopics();
  const out = new Map<string, Triple>();
  let denied = 0;
  for (const t of targets) {
    for (const info of await targetInfos(deps, t, list)) {
      if (deps.hidden.some((h) => h.stream === info.stream && h.topic === info.topic)) continue;
      if (!canPoll(principal.permissions, info.stream, info.topic)) {
        denied++;
        continue;
      }
      for (const partition of partitionsOf(t, info)) {
        out.set(`${info.stream}\u0000${info.topic}\u0000${partition}`, {
          stream: info.stream,
          topic: info.topic,
          partition,
        });
        if (out.size > deps.maxTriples) {
          return {
            refused:
              `resolves to more than ${deps.maxTriples} triples (max_triples_per_subscription)`,
            code5: 0x97,
          };
        }
      }
    }
  }
  if (out.size === 0) {
    return denied > 0
      ? { refused: "no poll right on any target", code5: 0x87, permanent: true }
      : { refused: "no existing target", code5: 0x80, permanent: true };
  }
  return { triples: [...out.values()] };
}

/** An exact filter: the one target a PUBLISH to it goes to. */
async function exactTriples(
  deps: FilterTripleDeps,
  principal: Principal,
  topic: string,
): Promise<FilterTriples> {
  const r = deps.preparer.resolve(topic);
  const invalid = checkResolution(r);
  if (invalid !== null) return { refused: invalid, code5: 0x8f, permanent: true };
  if (!canPoll(principal.permissions, r.stream, r.topic)) {
    return { refused: `no poll right on ${r.stream}/${r.topic}`, code5: 0x87, permanent: true };
  }
  let info;
  try {
    info = await deps.preparer.topics.lookup(r.stream, r.topic);
  } catch (err) {
    return {
      refused: `topic lookup failed: ${String((err as Error)?.message ?? err)}`,
      code5: 0x80,
    };
  }
  if (info === null) {
    return {
      refused: `target ${r.stream}/${r.topic} does not exist`,
      code5: 0x80,
      permanent: true,
    };
  }
  const partitions = r.partitionKey !== null
    ? [partitionForKey(r.partitionKey, info.partitions)]
    : Array.from({ length: info.partitions }, (_, i) => i);
  return {
    triples: partitions.map((partition) => ({ stream: r.stream, topic: r.topic, partition })),
  };
}

/** The existing topics a target names: a fixed pair looked up, patterns matched in the list. */
async function targetInfos(
  deps: FilterTripleDeps,
  t: FilterTarget,
  list: () => Promise<TopicInfo[]>,
): Promise<TopicInfo[]> {
  if ("name" in t.stream && "name" in t.topic) {
    const info = await deps.preparer.topics.lookup(t.stream.name, t.topic.name).catch(() => null);
    return info === null ? [] : [info];
  }
  const all = await list();
  return all.filter((i) => nameFits(t.stream, i.stream) && nameFits(t.topic, i.topic));
}

function nameFits(spec: NameSpec, name: string): boolean {
  return "name" in spec ? spec.name === name : spec.pattern.test(name);
}

/** A key the filter fixes gives its one partition; otherwise every partition. */
function partitionsOf(t: FilterTarget, info: TopicInfo): number[] {
  if (t.partitionKey !== null) return [partitionForKey(t.partitionKey, info.partitions)];
  return Array.from({ length: info.partitions }, (_, i) => i);
}
