/**
 * Topics whose appends the backend confirms before they are on disk (Iggy 0.9 topics without
 * fsync enforced, Iggy 0.10+ topics without `durability = persisted`: a PUBACK then means
 * "accepted by Iggy", not "on disk"). Each is named once
 * in a warning log line, and the set feeds `/ready`'s detail, the status page and `check`.
 *
 * Bounded: at most {@link MAX_NAMED} topics are named; past that one count says how many more.
 *
 * @module
 */
import type { Logger } from "../observe/logger.ts";
import type { TopicInfo } from "./port.ts";

/** How an operator makes a topic durable, in either Iggy dialect. */
export const DURABLE_FIX =
  "recreate it durable (Iggy 0.9: fsync enforced; Iggy 0.10+: durability = persisted), or let the gateway auto-create it";

/** Most topics named individually. */
export const MAX_NAMED = 100;

/** Collects topics that acknowledge before their disk. */
export class DurabilityWatch {
  #named = new Set<string>();
  #more = 0;
  #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Looks at a topic the gateway found or created; warns once if it acks before disk. */
  note(info: TopicInfo | null): void {
    if (info === null || !info.acksBeforeDisk) return;
    const name = `${info.stream}/${info.topic}`;
    if (this.#named.has(name)) return;
    if (this.#named.size >= MAX_NAMED) {
      this.#more++;
      return;
    }
    this.#named.add(name);
    this.#logger.warn(
      "Topic acknowledges sends before they are on disk: a PUBACK means accepted, not stored",
      { stream: info.stream, topic: info.topic, fix: DURABLE_FIX },
    );
  }

  /** One line for readiness and the status page, or none. */
  warnings(): string[] {
    if (this.#named.size === 0) return [];
    const more = this.#more > 0 ? ` and ${this.#more} more` : "";
    return [
      `PUBACK before disk (topic not durable) on ${[...this.#named].join(", ")}${more}`,
    ];
  }
}
