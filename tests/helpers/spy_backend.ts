/**
 * A backend wrapper for tests: counts calls, can hold appends at a gate (to prove that no
 * PUBACK precedes the durable append) or fail them (backend outage).
 *
 * @module
 */
import type {
  AppendReceipt,
  AppendRequest,
  AuthResult,
  BackendHealth,
  CreateTopicOptions,
  LogBackend,
  PartitionAddress,
  StoredMessage,
  TopicInfo,
} from "../../src/log/port.ts";
import { BackendError } from "../../src/log/port.ts";
import type { UserConfig } from "../../src/config/types.ts";

/** Wraps a real backend. */
export class SpyBackend implements LogBackend {
  readonly kind: string;
  readonly calls: string[] = [];
  /** When set, appends wait for `release()` before reaching the real backend. */
  holding = false;
  /** When set, appends fail with this error code. */
  failWith: BackendError["code"] | null = null;
  #held: (() => void)[] = [];

  constructor(readonly inner: LogBackend) {
    this.kind = inner.kind;
  }

  release(): void {
    this.holding = false;
    const h = this.#held;
    this.#held = [];
    h.forEach((r) => r());
  }

  get heldCount(): number {
    return this.#held.length;
  }

  open(): Promise<void> {
    return this.inner.open();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  health(): BackendHealth {
    if (this.failWith) return { ready: false, reason: `test outage (${this.failWith})` };
    return this.inner.health();
  }
  setUsers(users: readonly UserConfig[]): void {
    this.calls.push("setUsers");
    this.inner.setUsers?.(users);
  }
  principalOf(u: string): Promise<AuthResult> {
    this.calls.push("principalOf");
    return this.inner.principalOf(u);
  }
  authenticate(u: string, p: string): Promise<AuthResult> {
    this.calls.push("authenticate");
    return this.inner.authenticate(u, p);
  }
  getTopic(s: string, t: string): Promise<TopicInfo | null> {
    this.calls.push("getTopic");
    return this.inner.getTopic(s, t);
  }
  createTopic(s: string, t: string, o: CreateTopicOptions): Promise<TopicInfo> {
    this.calls.push("createTopic");
    return this.inner.createTopic(s, t, o);
  }
  async append(r: AppendRequest): Promise<AppendReceipt> {
    this.calls.push("append");
    if (this.holding) await new Promise<void>((res) => this.#held.push(res));
    if (this.failWith) throw new BackendError(this.failWith, "test outage");
    return this.inner.append(r);
  }
  poll(
    a: PartitionAddress,
    from: number,
    count: number,
    signal?: AbortSignal,
  ): Promise<StoredMessage[]> {
    return this.inner.poll(a, from, count, signal);
  }
  nextOffset(a: PartitionAddress): Promise<number> {
    return this.inner.nextOffset(a);
  }
  storeOffset(c: string, a: PartitionAddress, o: number): Promise<void> {
    return this.inner.storeOffset(c, a, o);
  }
  getOffset(c: string, a: PartitionAddress): Promise<number | null> {
    return this.inner.getOffset(c, a);
  }
}
