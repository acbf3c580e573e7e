/**
 * Permissions, mirroring Iggy's permission model so a site can move its
 * embedded-mode users to Iggy users one to one. Streams and topics are keyed by name.
 *
 * @module
 */

/** Global flags, in Iggy's wire order. */
export interface GlobalPermissions {
  readonly manage_servers: boolean;
  readonly read_servers: boolean;
  readonly manage_users: boolean;
  readonly read_users: boolean;
  readonly manage_streams: boolean;
  readonly read_streams: boolean;
  readonly manage_topics: boolean;
  readonly read_topics: boolean;
  readonly poll_messages: boolean;
  readonly send_messages: boolean;
}

/** Per-topic flags. */
export interface TopicPermissions {
  readonly manage_topic: boolean;
  readonly read_topic: boolean;
  readonly poll_messages: boolean;
  readonly send_messages: boolean;
}

/** Per-stream flags, with optional per-topic entries. */
export interface StreamPermissions {
  readonly manage_stream: boolean;
  readonly read_stream: boolean;
  readonly manage_topics: boolean;
  readonly read_topics: boolean;
  readonly poll_messages: boolean;
  readonly send_messages: boolean;
  readonly topics: ReadonlyMap<string, TopicPermissions>;
}

/** A principal's permissions: global flags plus per-stream entries. */
export interface Permissions {
  readonly global: GlobalPermissions;
  readonly streams: ReadonlyMap<string, StreamPermissions>;
}

/** Every global flag off. */
export const NO_GLOBAL_PERMISSIONS: GlobalPermissions = Object.freeze({
  manage_servers: false,
  read_servers: false,
  manage_users: false,
  read_users: false,
  manage_streams: false,
  read_streams: false,
  manage_topics: false,
  read_topics: false,
  poll_messages: false,
  send_messages: false,
});

/** Every global flag on (Iggy's root). */
export const ALL_GLOBAL_PERMISSIONS: GlobalPermissions = Object.freeze({
  manage_servers: true,
  read_servers: true,
  manage_users: true,
  read_users: true,
  manage_streams: true,
  read_streams: true,
  manage_topics: true,
  read_topics: true,
  poll_messages: true,
  send_messages: true,
});

/** Permissions that allow nothing. */
export const NO_PERMISSIONS: Permissions = Object.freeze({
  global: NO_GLOBAL_PERMISSIONS,
  streams: new Map(),
});

/** Iggy's "send" rule: may this principal append to stream/topic? */
export function canSend(p: Permissions, stream: string, topic: string): boolean {
  const g = p.global;
  if (g.send_messages || g.manage_streams || g.manage_topics) return true;
  const s = p.streams.get(stream);
  if (!s) return false;
  if (s.send_messages || s.manage_stream || s.manage_topics) return true;
  const t = s.topics.get(topic);
  return t !== undefined && (t.send_messages || t.manage_topic);
}

/** Iggy's "poll" rule (also governs consumer offsets): may this principal read stream/topic? */
export function canPoll(p: Permissions, stream: string, topic: string): boolean {
  const g = p.global;
  if (
    g.poll_messages || g.read_topics || g.manage_topics || g.read_streams || g.manage_streams
  ) return true;
  const s = p.streams.get(stream);
  if (!s) return false;
  if (s.manage_stream || s.read_stream || s.manage_topics || s.read_topics || s.poll_messages) {
    return true;
  }
  const t = s.topics.get(topic);
  return t !== undefined && (t.manage_topic || t.read_topic || t.poll_messages);
}

/** True when the principal may send or poll somewhere at all (else CONNACK 5). */
export function hasAnyDataRight(p: Permissions): boolean {
  const g = p.global;
  if (
    g.send_messages || g.poll_messages || g.manage_streams || g.manage_topics ||
    g.read_streams || g.read_topics
  ) return true;
  for (const s of p.streams.values()) {
    if (
      s.send_messages || s.poll_messages || s.manage_stream || s.manage_topics ||
      s.read_stream || s.read_topics
    ) return true;
    for (const t of s.topics.values()) {
      if (t.send_messages || t.poll_messages || t.manage_topic || t.read_topic) return true;
    }
  }
  return false;
}
