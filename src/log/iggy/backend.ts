/**
 * `IggyBackend`: the backend port over the gateway's own Iggy TCP client. Composes the
 * service connection pool, the append batcher, the topic metadata cache and the principal
 * authenticator; every error leaves through {@link toBackendError}.
 *
 * @module
 */
import type { GatewayConfig } from "../../config/types.ts";
import { BackendError } from "../port.ts";
import type * as port from "../port.ts";
import { decodeSendReply, type PollReply, storedMessagesOf } from "./batch.ts";
import { AppendBatcher } from "./batcher.ts";
import { Code, IggyError, Status } from "./codes.ts";
import * as cmd from "./v11/request_bodies.ts";
import { clusterDialers, type IggyBackendDeps } from "./dial.ts";
import { toBackendError } from "./errors.ts";
import { loadHashes } from "../../base/xxhash.ts";
import type { Credentials } from "./login.ts";
import { TopicRecordCache } from "./topic_record_cache.ts";
import { ClusterPool } from "./cluster.ts";
import { PrincipalAuthenticator } from "./principals.ts";
import { nextOffsetIn, type TopicRecord } from "./v11/records.ts";
import { CutSends } from "./cut_send.ts";
import { SendEncoder, type SendItem, wireSizeOf } from "./send_encoder.ts";
import { listTopics } from "./list_topics.ts";
import { type Dialect, DIALECT_011, DialectChooser, SessionKeeper } from "./dialect.ts";
import type { PartitionOps, PartitionOpsDeps } from "./partition_ops.ts";
import { describeServer } from "./server_info.ts";
import { PollSizes } from "./poll_sizes.ts";
import { IggyGroups } from "./consumer_groups.ts";

/** Consumer name used for polls (Offset strategy, no auto-commit: the name is not used). */
export const POLL_CONSUMER = "mqtt-gateway-poll";

/**
 * The Iggy backend. `config` is `[iggy]` of the gateway config; `auth.patUsername` is the
 * MQTT username that means "the password is an Iggy personal access token", and
 * `auth.cacheTtlMs` how long a successful `authenticate()` is remembered.
 */
export class IggyBackend implements port.LogBackend {
  /** Always "iggy". */
  readonly kind = "iggy";
  readonly remote: port.RemoteTuning = {
    /** Unkeyed appends: the batcher puts each send in the next partition (`batcher.ts`). */
    placesBalanced: true,
    /** Each send is encoded when it leaves, and its messages let go (`#send`). */
    releasesMessages: true,
    resendCounters: () => this.#resendCounters(),
    watchSends: (observe) => this.#onSend = observe,
  };
  readonly #config: GatewayConfig["iggy"];
  readonly #pool: ClusterPool;
  readonly #batcher: AppendBatcher<SendItem>;
  readonly #encoder = new SendEncoder();
  readonly #topics: TopicRecordCache;
  readonly #principals: PrincipalAuthenticator;
  readonly #chooser: DialectChooser;
  /** Partition operations of each dialect registered with so far (one, unless it changed). */
  readonly #opsByDialect = new Map<Dialect, PartitionOps>();
  readonly #opsDeps: PartitionOpsDeps;
  #state: "new" | "open" | "failed" | "closed" = "new";
  /** 0.11 sends cut off after they were written, resolved by a read-back (`cut_send.ts`). */
  readonly #cuts = new CutSends({
    ops: () => this.#partitions,
    consumer: POLL_CONSUMER,
    nextOffset: async (a) => nextOffsetIn(await this.#fetchTopic(a.stream, a.topic), a),
  });
  /** Consumer groups: the split of shared subscriptions between gateways (own login). */
  readonly groups: IggyGroups;
  /** Told of each confirmed send (`/metrics`: `iggy_send_seconds`, `iggy_send_messages`). */
  #onSend: port.SendObserver | undefined;
  /** How many messages each poll asks for, so its reply fits one frame. */
  readonly #polls: PollSizes;

  /** Builds the backend; nothing connects before {@link IggyBackend.open}. */
  constructor(
    config: GatewayConfig["iggy"],
    auth: { patUsername: string; cacheTtlMs: number },
    deps: IggyBackendDeps = {},
  ) {
    this.#config = config;
    this.#polls = new PollSizes(deps.maxMessageBytes);
    const dials = deps.dials ?? (deps.dial ? [deps.dial] : clusterDialers(config));
    const credentials: Credentials = config.token
      ? { kind: "token", token: config.token }
      : { kind: "password", username: config.username, password: config.password };
    this.#chooser = new DialectChooser(config.protocol);
    const connectOptions = { timeoutMs: config.request_timeout_ms, label: "auth" };
    this.#pool = new ClusterPool(dials, {
      chooser: this.#chooser,
      sessions: new SessionKeeper(),
      credentials,
      size: config.pool_size,
      requestTimeoutMs: config.request_timeout_ms,
      heartbeatMs: config.heartbeat_interval_ms,
      reconnectMaxMs: config.reconnect_max_ms,
      random: deps.random,
    });
    this.#batcher = new AppendBatcher<SendItem>(
      (a, m, bytes, count) => this.#send(a, m, bytes, count),
      wireSizeOf,
      {
        maxMessages: config.batch_max_messages,
        maxBytes: config.batch_max_bytes,
        lingerMs: config.batch_linger_ms,
        // A flood of unkeyed messages may use every service connection, one per partition.
        maxParallel: config.pool_size,
      },
    );
    this.#topics = new TopicRecordCache(
      (s, t) => this.#fetchTopic(s, t),
      config.metadata_refresh_ms,
    );
    this.#opsDeps = this.#partitionOpsDeps(config.request_timeout_ms, deps.logger);
    this.groups = new IggyGroups(() =>
      this.#chooser.connect(this.#pool.dial, credentials, { ...connectOptions, label: "groups" })
    );
    this.#principals = new PrincipalAuthenticator({
      connect: (c) => this.#chooser.connect(this.#pool.dial, c, connectOptions),
      dialect: () => this.#dialect,
      patUsername: auth.patUsername,
      cacheTtlMs: auth.cacheTtlMs,
      service: () => this.#pool.ready ? (c, b) => this.#pool.request(c, b) : undefined,
    });
  }

  #partitionOpsDeps(timeoutMs: number, logger?: IggyBackendDeps["logger"]): PartitionOpsDeps {
    return {
      request: (code, body, framed, o) => this.#pool.request(code, body, framed, o),
      session: () => this.#pool.registration?.session,
      retireSession: (session) => this.#pool.retire(session),
      timeoutMs,
      warn: logger ? (m, f) => logger.warn(m, f) : undefined,
    };
  }

  /** The partition operations of the dialect in use. */
  get #partitions(): PartitionOps {
    const d = this.#dialect;
    let ops = this.#opsByDialect.get(d);
    if (ops === undefined) this.#opsByDialect.set(d, ops = d.partitionOps(this.#opsDeps));
    return ops;
  }

  async open(): Promise<void> {
    if (this.#state !== "new") throw new BackendError("invalid", "IggyBackend.open() called twice");
    this.#state = "open";
    await loadHashes();
    try {
      await this.#pool.open();
    } catch (e) {
      this.#state = "failed"; // health() keeps telling why
      throw toBackendError(e, `connect to Iggy at ${this.#config.address}`);
    }
  }

  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#state = "closed";
    await this.#batcher.flush();
    for (const ops of this.#opsByDialect.values()) ops.cancelAll();
    await this.groups.close();
    await this.#pool.close();
  }

  /** The dialect in use: the detected one, 0.11 until a first Register tells. */
  get #dialect(): Dialect {
    return this.#chooser.current ?? DIALECT_011;
  }

  health(): port.BackendHealth {
    if (this.#state === "closed") return { ready: false, reason: "Iggy backend is closed" };
    const detail = describeServer(this.#pool.registration, this.#chooser);
    if (this.#pool.ready) return { ready: true, detail };
    const why = this.#pool.lastError?.message ??
      `Iggy at ${this.#config.address} not connected yet`;
    return { ready: false, reason: why };
  }

  #resendCounters(): port.ResendCounters {
    let resends = 0;
    let renewals = 0;
    for (const ops of this.#opsByDialect.values()) {
      resends += ops.stats.resends;
      renewals += ops.stats.renewals;
    }
    const { found: foundStored, resent, failed: possibleDuplicates } = this.#cuts.counts;
    return { resends: resends + resent, renewals, foundStored, possibleDuplicates };
  }

  authenticate(username: string, password: string): Promise<port.AuthResult> {
    return this.#principals.authenticate(username, password);
  }
  principalOf(username: string): Promise<port.AuthResult> {
    return this.#principals.principalOf(username);
  }

  async #call<T>(
    action: string,
    code: number,
    body: Uint8Array,
    decode: (b: Uint8Array) => T,
  ): Promise<T> {
    try {
      return decode(await this.#pool.request(code, body));
    } catch (e) {
      throw toBackendError(e, action);
    }
  }

  #fetchTopic(stream: string, topic: string): Promise<TopicRecord | null> {
    return this.#call(
      `read topic "${topic}" of stream "${stream}"`,
      Code.GET_TOPIC,
      cmd.getTopicBody(stream, topic),
      (b) => this.#dialect.decodeTopic(b),
    );
  }

  async getTopic(stream: string, topic: string): Promise<port.TopicInfo | null> {
    const r = await this.#topics.get(stream, topic);
    return r ? this.#info(stream, topic, r) : null;
  }

  /** Every topic of every stream (`list_topics.ts`). */
  listTopics(): Promise<port.TopicInfo[]> {
    return listTopics((w, c, b, d) => this.#call(w, c, b, d), this.#dialect);
  }

  async createTopic(
    stream: string,
    topic: string,
    options: port.CreateTopicOptions,
  ): Promise<port.TopicInfo> {
    const where = `topic "${topic}" of stream "${stream}"`;
    try {
      await this.#pool.request(Code.CREATE_STREAM, cmd.createStreamBody(stream));
    } catch (e) {
      if (!(e instanceof IggyError && e.code === Status.STREAM_EXISTS)) {
        throw toBackendError(e, `create stream "${stream}"`);
      }
    }
    let record: TopicRecord | null;
    try {
      const body = this.#dialect.createTopicBody(stream, topic, options);
      record = this.#dialect.decodeTopic(await this.#pool.request(Code.CREATE_TOPIC, body));
    } catch (e) {
      if (!(e instanceof IggyError && e.code === Status.TOPIC_EXISTS)) {
        throw toBackendError(e, `create ${where}`);
      }
      record = await this.#fetchTopic(stream, topic);
    }
    if (!record) throw new BackendError("not_found", `Cannot create ${where}: it vanished`);
    this.#topics.set(stream, topic, record);
    return this.#info(stream, topic, record);
  }

  append(request: port.AppendRequest): Promise<port.AppendReceipt> {
    if (this.#state === "closed") return this.#closedAppend(request);
    if (request.messages.length === 0) return Promise.resolve({ baseOffset: null });
    return this.#batcher.append(request);
  }

  /** Not async, and the text only made here: one promise. */
  #closedAppend(a: port.PartitionAddress): Promise<port.AppendReceipt> {
    const why = `stream "${a.stream}" topic "${a.topic}" partition ${a.partition}`;
    return Promise.reject(
      new BackendError("unavailable", `Cannot append to ${why}: Iggy backend is closed`),
    );
  }

  /** Forwarded messages go out as they were stored: their headers transcoded byte by byte. */
  appendEncoded(request: port.EncodedAppendRequest): Promise<port.AppendReceipt> {
    if (this.#state === "closed") return this.#closedAppend(request);
    const { messages } = request;
    if (messages.count === 0) return Promise.resolve({ baseOffset: null });
    try {
      return this.#batcher.append({ ...request, messages: [messages], count: messages.count });
    } catch (e) { // the batcher sizes the run: a header Iggy refuses is found here
      return Promise.reject(this.#sendError(e, request));
    }
  }

  /**
   * Encodes the send at once and keeps only the frame: from here on no message object is held
   * (`releasesMessages`), so under load they die in the young generation instead of surviving
   * the round trip to Iggy, which lowers the GC's share of the gateway's busy time.
   */
  #send(
    a: port.PartitionAddress,
    messages: readonly SendItem[],
    bytes: number,
    count: number,
  ): Promise<number | null> {
    let frame: Uint8Array;
    try {
      // The envelope replaces empty payloads: the encoder refuses one as a bug.
      const now = Date.now() * 1000;
      frame = this.#encoder.encode(a.stream, a.topic, a.partition, messages, now, bytes, count);
    } catch (e) {
      return Promise.reject(this.#sendError(e, a));
    }
    return this.#sendFrame(a, frame, count);
  }

  async #sendFrame(a: port.PartitionAddress, frame: Uint8Array, count: number) {
    const ops = this.#partitions;
    const left = this.#onSend === undefined ? 0 : performance.now();
    let baseOffset: number | null;
    try {
      baseOffset = decodeSendReply(await ops.send(a, frame, count));
      this.#encoder.release(frame); // confirmed: Iggy has read it all, nothing resends it
    } catch (e) {
      if (!ops.mayHaveStored(e)) throw this.#sendError(e, a);
      baseOffset = await this.#cuts.resolve(a, frame, count, e, ops).catch((err) => {
        throw this.#sendError(err, a);
      });
    }
    this.#onSend?.((performance.now() - left) / 1000, count);
    return baseOffset;
  }

  #sendError(e: unknown, a: port.PartitionAddress): BackendError {
    const err = toBackendError(
      e,
      `append to stream "${a.stream}" topic "${a.topic}" partition ${a.partition}`,
    );
    if (err.code === "not_found") this.#topics.invalidate(a.stream, a.topic);
    return err;
  }

  /**
   * Reads from `fromOffset`. On 0.12 a caught-up poll waits in Iggy until a message arrives
   * (or about a second passes); `signal` cancels that wait (CANCEL_DEFERRED_REQUEST).
   */
  async poll(
    address: port.PartitionAddress,
    fromOffset: number,
    count: number,
    signal?: AbortSignal,
  ): Promise<port.StoredMessage[]> {
    if (count <= 0) return [];
    const where =
      `poll stream "${address.stream}" topic "${address.topic}" partition ${address.partition}`;
    let reply: PollReply;
    try {
      const ask = (n: number) =>
        this.#partitions.poll(POLL_CONSUMER, address, fromOffset, n, signal);
      reply = await this.#polls.poll(where, count, ask);
    } catch (e) {
      throw toBackendError(e, where);
    }
    try {
      return storedMessagesOf(reply, address.partition, fromOffset, count);
    } catch (e) {
      throw toBackendError(e, where);
    }
  }

  async nextOffset(address: port.PartitionAddress): Promise<number> {
    const record = await this.#fetchTopic(address.stream, address.topic);
    if (record) this.#topics.set(address.stream, address.topic, record);
    return nextOffsetIn(record, address);
  }

  async storeOffset(consumer: string, a: port.PartitionAddress, offset: number): Promise<void> {
    await this.#partitions.storeOffset(consumer, a, offset).catch((e) => {
      throw toBackendError(e, offsetAction("store", consumer, a));
    });
  }

  /** Deletes the consumer's offset; none stored (3021) counts as deleted. */
  async deleteOffset(consumer: string, a: port.PartitionAddress): Promise<void> {
    await this.#partitions.deleteOffset(consumer, a).catch((e) => {
      if (e instanceof IggyError && e.code === Status.CONSUMER_OFFSET_NOT_FOUND) return;
      throw toBackendError(e, offsetAction("delete", consumer, a));
    });
  }

  getOffset(consumer: string, a: port.PartitionAddress): Promise<number | null> {
    return this.#partitions.getOffset(consumer, a).catch((e) => {
      throw toBackendError(e, offsetAction("read", consumer, a));
    });
  }

  #info(stream: string, topic: string, r: TopicRecord): port.TopicInfo {
    return {
      stream,
      topic,
      partitions: r.partitionsCount,
      acksBeforeDisk: this.#dialect.acksBeforeDisk(r),
      ...(r.messageExpiryMicros ? { messageExpiryMicros: r.messageExpiryMicros } : {}),
    };
  }
}

function offsetAction(verb: string, consumer: string, a: port.PartitionAddress): string {
  return `${verb} offset of consumer "${consumer}" on stream "${a.stream}" topic "${a.topic}"`;
}
