/**
 * In-process append signals: the backend's `onAppend()` listeners (the port's contract) are told,
 * after each written transaction and before its fsync, which partitions grew. Nothing in the
 * gateway subscribes today: shared readers are woken by `Delivery.notifyAppended` instead.
 *
 * @module
 */
import type { AppendListener } from "../port.ts";
import type { TopicState } from "./_catalog.ts";

/** The onAppend() listeners of one backend. */
export class AppendSignals {
  readonly #listeners = new Set<AppendListener>();
  /** Exceptions thrown by listeners; counted, never rethrown. */
  errors = 0;

  /** Adds a listener; returns its unsubscribe function. */
  add(listener: AppendListener): () => void {
    // Wrapped so the same function may subscribe twice and unsubscribe each independently.
    const entry: AppendListener = (address, next) => listener(address, next);
    this.#listeners.add(entry);
    return () => this.#listeners.delete(entry);
  }

  /**
   * Tells every listener the next offset of each partition that grew: `grown` is flattened
   * (topic, partition, next offset) triples.
   */
  emit(grown: readonly (TopicState | number)[]): void {
    if (this.#listeners.size === 0) return;
    for (let i = 0; i < grown.length; i += 3) {
      const state = grown[i] as TopicState;
      const partition = grown[i + 1] as number;
      const address = { stream: state.stream, topic: state.topic, partition };
      const next = grown[i + 2] as number;
      for (const listener of this.#listeners) {
        // A listener's bug must not turn a committed append into a failed one.
        try {
          listener(address, next);
        } catch {
          this.errors++;
        }
      }
    }
  }
}
