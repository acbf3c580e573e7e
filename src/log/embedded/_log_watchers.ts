/**
 * Whom the embedded log tells what happens to it: who watches a partition grow (the forwarder's
 * lanes wait for that instead of looking again and again) and who hears of its retention passes.
 *
 * @module
 */
import type { GrowthObserver, RetentionObserver } from "../local_log.ts";
import type { TopicState } from "./_catalog.ts";

/** What a group commit tells of each transaction. */
export interface CommitWatch {
  /** A partition's messages are readable up to `next` (after the write, before the fsync). */
  grew(state: TopicState, partition: number, next: number): void;
  /** A transaction is on disk. */
  durable(): void;
}

/** The log's watchers (`LocalLog.watchGrowth`, `LocalLog.watchRetention`). */
export class LogWatchers {
  retention: RetentionObserver | undefined;
  readonly #growth = new Set<GrowthObserver>();

  watchGrowth(observe: GrowthObserver): () => void {
    this.#growth.add(observe);
    return () => void this.#growth.delete(observe);
  }

  grew(state: TopicState, partition: number, next: number): void {
    if (this.#growth.size === 0) return;
    const address = { stream: state.stream, topic: state.topic, partition };
    for (const observe of this.#growth) {
      try {
        observe(address, next);
      } catch { /* a watcher must not fail the commit */ }
    }
  }
}
