/**
 * Authenticates MQTT users as Iggy users: log in to Iggy as that user on a short-lived
 * connection (Register with password, or with a personal access token when the username is
 * `pat_username`), read the user's permissions with GET_USER, and turn Iggy's numeric
 * stream/topic ids into names (GET_STREAMS / GET_STREAM) so the result is name-keyed like
 * every other permission in the gateway. Successes are cached for `cache_ttl_ms`, keyed by
 * username and a SHA-256 of the password; the cache holds at most {@link MAX_CACHED} entries
 * (the oldest goes first).
 *
 * @module
 */

import type { AuthResult } from "../port.ts";
import {
  ALL_GLOBAL_PERMISSIONS,
  type GlobalPermissions,
  NO_PERMISSIONS,
  type Permissions,
  type StreamPermissions,
  type TopicPermissions,
} from "../../access/permissions.ts";
import { ByteWriter, toHex, toUtf8 } from "./bytes.ts";
import { Code, EvictionReason, IggyError, IggyEvictionError, Status } from "./codes.ts";
import { EncodeError, writeIdentifier, writeNumericIdentifier } from "./encoding.ts";
import type { Credentials } from "./login.ts";
import { type Dialect, DIALECT_011, type Link } from "./dialect.ts";
import type { UserRecord, WirePermissions } from "./v11/records.ts";

/** Bound of the principal cache. */
export const MAX_CACHED = 10_000;

/** Sends a read command somewhere (the service pool, or the user's own connection). */
export type RequestFn = (code: number, body?: Uint8Array) => Promise<Uint8Array>;

/** Settings of the authenticator. */
export interface PrincipalOptions {
  /** Opens a connection logged in with `credentials` (in the server's dialect). */
  readonly connect: (credentials: Credentials) => Promise<Link>;
  /** Decoders of the dialect the server speaks (default 0.11). */
  readonly dialect?: () => Dialect;
  /** Username that means "the password is a personal access token" ("" = never). */
  readonly patUsername: string;
  readonly cacheTtlMs: number;
  /** Service-identity requests for id→name look-ups, or undefined when not connected. */
  readonly service: () => RequestFn | undefined;
  readonly now?: () => number;
}

const GLOBAL_KEYS: (keyof GlobalPermissions)[] = [
  "manage_servers",
  "read_servers",
  "manage_users",
  "read_users",
  "manage_streams",
  "read_streams",
  "manage_topics",
  "read_topics",
  "poll_messages",
  "send_messages",
];

function numericId(id: number): Uint8Array {
  return writeNumericIdentifier(new ByteWriter(6), id).finish();
}

/**
 * Maps wire permissions (numeric ids) to name-keyed permissions. Streams or topics whose id
 * no longer resolves (deleted meanwhile) are left out: an unknown grant grants nothing.
 */
export async function nameWirePermissions(
  wire: WirePermissions,
  request: RequestFn,
  d: Dialect = DIALECT_011,
): Promise<Permissions> {
  const global = Object.fromEntries(
    GLOBAL_KEYS.map((k, i) => [k, wire.global[i]]),
  ) as unknown as GlobalPermissions;
  const streams = new Map<string, StreamPermissions>();
  if (wire.streams.length > 0) {
    const names = new Map(
      d.decodeStreams(await request(Code.GET_STREAMS)).map((s) => [s.id, s.name]),
    );
    for (const s of wire.streams) {
      const name = names.get(s.streamId);
      if (name === undefined) continue;
      const topics = new Map<string, TopicPermissions>();
      if (s.topics.length > 0) {
        const details = d.decodeStreamDetails(
          await request(Code.GET_STREAM, numericId(s.streamId)),
        );
        const topicNames = new Map(details?.topics.map((t) => [t.id, t.name]) ?? []);
        for (const t of s.topics) {
          const topicName = topicNames.get(t.topicId);
          if (topicName === undefined) continue;
          const [manage_topic, read_topic, poll_messages, send_messages] = t.flags;
          topics.set(topicName, { manage_topic, read_topic, poll_messages, send_messages });
        }
      }
      const [manage_stream, read_stream, manage_topics, read_topics, poll_messages, send_messages] =
        s.flags;
      streams.set(name, {
        manage_stream,
        read_stream,
        manage_topics,
        read_topics,
        poll_messages,
        send_messages,
        topics,
      });
    }
  }
  return { global, streams };
}

/** Outcome of a failed login, as the port names it. */
export function authFailure(e: unknown): AuthResult {
  if (e instanceof IggyEvictionError) {
    if (e.reason === EvictionReason.USER_INACTIVE) return { ok: false, reason: "inactive" };
    if (
      e.reason === EvictionReason.INVALID_CREDENTIALS || e.reason === EvictionReason.INVALID_TOKEN
    ) return { ok: false, reason: "bad_credentials" };
    return { ok: false, reason: "unavailable" };
  }
  if (e instanceof IggyError) {
    if (e.code === Status.USER_INACTIVE) return { ok: false, reason: "inactive" };
    if ([42, 43, 44, 53, 54].includes(e.code)) return { ok: false, reason: "bad_credentials" };
    return { ok: false, reason: "unavailable" };
  }
  if (e instanceof EncodeError) return { ok: false, reason: "bad_credentials" };
  return { ok: false, reason: "unavailable" };
}

/** The principal authenticator with its cache. */
export class PrincipalAuthenticator {
  readonly #o: PrincipalOptions;
  readonly #now: () => number;
  readonly #cache = new Map<string, { result: AuthResult; expiresAt: number }>();

  constructor(options: PrincipalOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Checks the credentials against Iggy; expected failures are values. */
  async authenticate(username: string, password: string): Promise<AuthResult> {
    const key = await cacheKey(username, password);
    const hit = this.#cache.get(key);
    if (hit && hit.expiresAt > this.#now()) return hit.result;
    this.#cache.delete(key);
    const result = await this.#login(username, password);
    this.#remember(key, result);
    return result;
  }

  /**
   * The Iggy user of that name with its permissions, read by the service identity (which then
   * needs `read_users`): for a principal named by a verified client certificate, so no
   * password is checked. Cached like logins.
   */
  async principalOf(username: string): Promise<AuthResult> {
    const key = `cert\u0000${username}`;
    const hit = this.#cache.get(key);
    if (hit && hit.expiresAt > this.#now()) return hit.result;
    this.#cache.delete(key);
    const request = this.#o.service();
    if (request === undefined) return { ok: false, reason: "unavailable" };
    let result: AuthResult;
    try {
      const d = this.#o.dialect?.() ?? DIALECT_011;
      const body = writeIdentifier(new ByteWriter(2 + 255), username).finish();
      const user = d.decodeUser(await request(Code.GET_USER, body));
      result = user === null
        ? { ok: false, reason: "unknown" }
        : await this.#principalOfUser(user, request, d);
    } catch (e) {
      if (e instanceof IggyError && e.code === Status.RESOURCE_NOT_FOUND) {
        return { ok: false, reason: "unknown" };
      }
      if (e instanceof EncodeError) return { ok: false, reason: "unknown" };
      return { ok: false, reason: "unavailable" };
    }
    this.#remember(key, result);
    return result;
  }

  #remember(key: string, result: AuthResult): void {
    if (!result.ok || this.#o.cacheTtlMs <= 0) return;
    if (this.#cache.size >= MAX_CACHED) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(key, { result, expiresAt: this.#now() + this.#o.cacheTtlMs });
  }

  async #principalOfUser(user: UserRecord, request: RequestFn, d: Dialect): Promise<AuthResult> {
    if (user.status === 2) return { ok: false, reason: "inactive" };
    let permissions: Permissions;
    if (user.permissions) {
      permissions = await nameWirePermissions(user.permissions, request, d);
    } else {
      // root (id 0) holds every right even when no permission block is stored
      permissions = user.id === 0
        ? { global: ALL_GLOBAL_PERMISSIONS, streams: new Map() }
        : NO_PERMISSIONS;
    }
    return { ok: true, principal: { username: user.username, permissions } };
  }

  async #login(username: string, password: string): Promise<AuthResult> {
    const credentials: Credentials = this.#o.patUsername !== "" && username === this.#o.patUsername
      ? { kind: "token", token: password }
      : { kind: "password", username, password };
    let conn: Link | undefined;
    try {
      conn = await this.#o.connect(credentials);
      const d = this.#o.dialect?.() ?? DIALECT_011;
      const { userId } = conn.registration!;
      const user = d.decodeUser(await conn.request(Code.GET_USER, numericId(userId)));
      if (!user) return { ok: false, reason: "bad_credentials" };
      const own = conn;
      const request = this.#o.service() ?? ((c, b) => own.request(c, b));
      return await this.#principalOfUser(user, request, d);
    } catch (e) {
      return authFailure(e);
    } finally {
      await conn?.close();
    }
  }
}

async function cacheKey(username: string, password: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", toUtf8(password));
  return `${username}\u0000${toHex(new Uint8Array(digest))}`;
}
