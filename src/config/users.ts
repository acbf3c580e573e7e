/**
 * Parses `[[users]]` entries: username, password hash and Iggy-shaped permissions.
 *
 * ```toml
 * [[users]]
 * username = "sensor"
 * password_hash = "pbkdf2-sha256$210000$…$…"   # absent: client certificate only
 * client_id_pattern = "^{username}-"             # optional
 * [users.permissions.global]
 * send_messages = true
 * [users.permissions.streams.building_north]
 * poll_messages = true
 * [users.permissions.streams.building_north.topics.telemetry]
 * send_messages = true
 * ```
 *
 * @module
 */
import { ConfigError } from "./errors.ts";
import type { UserConfig } from "./types.ts";
import {
  type GlobalPermissions,
  NO_GLOBAL_PERMISSIONS,
  type Permissions,
  type StreamPermissions,
  type TopicPermissions,
} from "../access/permissions.ts";
import { isValidPasswordHash } from "../access/password.ts";
import { utf8Length } from "../base/utf8.ts";

const STREAM_FLAGS = [
  "manage_stream",
  "read_stream",
  "manage_topics",
  "read_topics",
  "poll_messages",
  "send_messages",
] as const;
const TOPIC_FLAGS = ["manage_topic", "read_topic", "poll_messages", "send_messages"] as const;

/** Parses the `users` array of the config document. */
export function parseUsers(raw: unknown): UserConfig[] {
  if (!Array.isArray(raw)) throw new ConfigError("users", "must be an array of tables [[users]]");
  return raw.map((entry, i) => parseUser(entry, `users[${i}]`));
}

function parseUser(raw: unknown, at: string): UserConfig {
  const o = asTable(raw, at);
  onlyKeys(o, at, ["username", "password_hash", "client_id_pattern", "permissions"]);
  const username = o.username;
  if (typeof username !== "string" || username.length === 0 || utf8Length(username) > 255) {
    throw new ConfigError(`${at}.username`, "must be a string of 1..255 bytes");
  }
  // No password_hash: the user logs in with a client certificate only (listeners.tls_identity).
  const hash = o.password_hash ?? null;
  if (hash !== null && (typeof hash !== "string" || !isValidPasswordHash(hash))) {
    throw new ConfigError(
      `${at}.password_hash`,
      "must be a hash printed by the hash-password command",
    );
  }
  const permissions = parsePermissions(o.permissions ?? {}, `${at}.permissions`);
  const pattern = o.client_id_pattern;
  if (pattern === undefined) return { username, passwordHash: hash, permissions };
  if (typeof pattern !== "string") {
    throw new ConfigError(`${at}.client_id_pattern`, "must be a string");
  }
  checkClientIdPattern(`${at}.client_id_pattern`, pattern);
  return { username, passwordHash: hash, permissions, clientIdPattern: pattern };
}

/**
 * Refuses a `client_id_pattern` that does not compile as a regular expression (u flag) once
 * `{username}` is filled in; "" is no pattern.
 */
export function checkClientIdPattern(key: string, pattern: string): void {
  try {
    new RegExp(pattern.replaceAll("{username}", "user"), "u");
  } catch (err) {
    throw new ConfigError(key, `is not a valid regular expression: ${(err as Error).message}`);
  }
}

/**
 * Parses the `[anonymous]` table: `permissions`, in a user's form, are the rights of anonymous
 * clients (per stream and topic, where `auth.anonymous_permissions` grants on every one).
 */
export function parseAnonymous(raw: unknown): Permissions {
  const o = asTable(raw, "anonymous");
  onlyKeys(o, "anonymous", ["permissions"]);
  return parsePermissions(o.permissions ?? {}, "anonymous.permissions");
}

/** Parses a permissions table (also used for tests and the anonymous principal). */
export function parsePermissions(raw: unknown, at: string): Permissions {
  const o = asTable(raw, at);
  onlyKeys(o, at, ["global", "streams"]);
  const globalNames = Object.keys(NO_GLOBAL_PERMISSIONS) as (keyof GlobalPermissions)[];
  const global: GlobalPermissions = flags(o.global ?? {}, `${at}.global`, globalNames);
  const streams = new Map<string, StreamPermissions>();
  const rawStreams = asTable(o.streams ?? {}, `${at}.streams`);
  for (const [name, body] of Object.entries(rawStreams)) {
    const sat = `${at}.streams.${name}`;
    const st = asTable(body, sat);
    const { topics: rawTopics, ...rest } = st;
    const sflags: Omit<StreamPermissions, "topics"> = flags(rest, sat, STREAM_FLAGS);
    const topics = new Map<string, TopicPermissions>();
    for (const [tname, tbody] of Object.entries(asTable(rawTopics ?? {}, `${sat}.topics`))) {
      topics.set(tname, flags(tbody, `${sat}.topics.${tname}`, TOPIC_FLAGS));
    }
    streams.set(name, { ...sflags, topics });
  }
  return { global, streams };
}

/** A table of boolean flags: exactly `names`, each true or false (absent: false). */
function flags<K extends string>(
  raw: unknown,
  at: string,
  names: readonly K[],
): Record<K, boolean> {
  const o = asTable(raw, at);
  onlyKeys(o, at, names);
  const out = {} as Record<K, boolean>;
  for (const n of names) {
    const v = o[n] ?? false;
    if (typeof v !== "boolean") throw new ConfigError(`${at}.${n}`, "must be true or false");
    out[n] = v;
  }
  return out;
}

function asTable(raw: unknown, at: string): Record<string, unknown> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new ConfigError(at, "must be a table");
  }
  return raw as Record<string, unknown>;
}

function onlyKeys(o: Record<string, unknown>, at: string, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) throw new ConfigError(`${at}.${k}`, "unknown key");
  }
}
