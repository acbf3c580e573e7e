/**
 * A wrapper of the embedded log for tests: counts calls, can hold appends at a gate (to prove
 * that no PUBACK precedes the durable append) or fail them (backend outage).
 *
 * @module
 */
import type {
  AppendReceipt,
  AppendRequest,
  AuthResult,
  BackendHealth,
  CreateTopicOptions,
  EncodedAppendRequest,
  EncodedMessages,
  LogBackend,
  PartitionAddress,
  StoredMessage,
  TopicInfo,
} from "../../src/log/port.ts";
import type {
  GrowthObserver,
  LocalLog,
  PartitionBytes,
  RetentionObserver,
} from "../../src/log/local_log.ts";
import { BackendError } from "../../src/log/port.ts";
import { isLocalLog } from "../../src/log/local_log.ts";
import type { UserConfig } from "../../src/config/types.ts";

/** Wraps the embedded log. */
export class SpyBackend implements LocalLog {
  readonly kind = "embedded";
  readonly inner: LocalLog;
  readonly calls: string[] = [];
  /** When set, appends wait for `release()` before reaching the real backend. */
  holding = false;
  /** When set, appends fail with this error code. */
  failWith: BackendError["code"] | null = null;
  #held: (() => void)[] = [];

  constructor(inner: LogBackend) {
    if (!isLocalLog(inner)) throw new Error(`SpyBackend wraps the embedded log, not ${inner.kind}`);
    this.inner = inner;
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
    this.inner.setUsers(users);
  }
  principalOf(u: string): Promise<AuthResult> {
    this.calls.push("principalOf");
    return this.inner.principalOf(u);
  }
  authenticate(u: string, p: string): Promise<AuthResult> {
    this.calls.push("authenticate");
    return this.inner.authenticate(u, p);
  }
  listTopics(): Promise<TopicInfo[]> {
    return this.inner.listTopics();
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
  partitionBytes(a: PartitionAddress): Promise<PartitionBytes> {
    return this.inner.partitionBytes(a);
  }
  pollEncoded(
    a: PartitionAddress,
    from: number,
    count: number,
    maxBytes: number,
  ): Promise<EncodedMessages | null> {
    return this.inner.pollEncoded(a, from, count, maxBytes);
  }
  appendEncoded(r: EncodedAppendRequest): Promise<AppendReceipt> {
    return this.inner.appendEncoded(r);
  }
  watchRetention(observe: RetentionObserver): void {
    this.inner.watchRetention(observe);
  }
  truncate(a: PartitionAddress, before: number): Promise<number> {
    return this.inner.truncate(a, before);
  }
  watchGrowth(observe: GrowthObserver): () => void {
    return this.inner.watchGrowth(observe);
  }
  storeOffset(c: string, a: PartitionAddress, o: number): Promise<void> {
    return this.inner.storeOffset(c, a, o);
  }
  getOffset(c: string, a: PartitionAddress): Promise<number | null> {
    return this.inner.getOffset(c, a);
  }
  deleteOffset(c: string, a: PartitionAddress): Promise<void> {
    return this.inner.deleteOffset(c, a);
  }
}
