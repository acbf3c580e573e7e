/**
 * Iggy consumer groups as the partition split of shared subscriptions between gateways
 * (`LogBackend.groups`). Iggy deals a topic's partitions over the members of a group and deals
 * them again when a member joins, leaves or its connection closes; a member asks which
 * partitions are its own with SYNC_CONSUMER_GROUP (606). Membership belongs to a login session,
 * so it lives on one connection of its own (the service pool's connections come and go): when
 * that connection is lost, so are its memberships, and {@link IggyGroups.assigned} says so
 * (null) for the caller to join again.
 *
 * Only the split is taken from the group: the gateway reads with its own readers and keeps the
 * group's position as a named consumer's offsets, which any connection may store (a group's own
 * offsets may be stored only by the member owning the partition).
 *
 * Bodies (protocol 0.11, Iggy server 0.9): CREATE `[stream][topic][name:Name]`, JOIN / LEAVE /
 * SYNC `[stream][topic][group]`, streams, topics and groups by name. SYNC answers
 * `[generation:u64][n:u32][partition:u32 × n]`, or nothing to a client that is not a member; GET
 * (600) `[id:u32][partitions:u32][members:u32][name:Name]` then the members, or nothing when the
 * group does not exist.
 *
 * @module
 */
import { ByteReader, ByteWriter } from "./bytes.ts";
import { Code, IggyError } from "./codes.ts";
import { writeIdentifier, writeName } from "./encoding.ts";
import type { GroupMembership } from "../port.ts";
import type { Link } from "./dialect.ts";

/** Command codes of the consumer group commands. */
export const GroupCode = Object.freeze({
  GET: Code.GET_CONSUMER_GROUP,
  CREATE: Code.CREATE_CONSUMER_GROUP,
  JOIN: Code.JOIN_CONSUMER_GROUP,
  LEAVE: Code.LEAVE_CONSUMER_GROUP,
  SYNC: Code.SYNC_CONSUMER_GROUP,
});

/** Error codes: the group name exists (create), no such group (join), not a member (leave). */
const GROUP_EXISTS = 5004;
const GROUP_NOT_FOUND = 5000;
const MEMBER_NOT_FOUND = 5006;

/** One request on the membership connection: code and body to reply body. */
export type GroupRequest = (code: number, body: Uint8Array) => Promise<Uint8Array>;

/** `[stream][topic][group]`, all by name. */
export function groupBody(stream: string, topic: string, group: string): Uint8Array {
  const w = new ByteWriter();
  writeIdentifier(w, stream);
  writeIdentifier(w, topic);
  return writeIdentifier(w, group).finish();
}

/** CREATE_CONSUMER_GROUP: `[stream][topic][name]` (the server picks the id). */
export function createGroupBody(stream: string, topic: string, group: string): Uint8Array {
  const w = new ByteWriter();
  writeIdentifier(w, stream);
  writeIdentifier(w, topic);
  return writeName(w, group, "consumer group name").finish();
}

/** SYNC_CONSUMER_GROUP reply: the partitions this member owns; null when it is none. */
export function decodeSync(body: Uint8Array): number[] | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  r.u64n("generation");
  const n = r.u32("partitions_count");
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(r.u32("partition_id"));
  return out.sort((a, b) => a - b);
}

/** GET_CONSUMER_GROUP reply: its member count (0 when the group does not exist). */
export function decodeMembers(body: Uint8Array): number {
  if (body.length === 0) return 0;
  const r = new ByteReader(body);
  r.u32("id");
  r.u32("partitions_count");
  return r.u32("members_count");
}

/**
 * Consumer group membership over a connection of its own: a membership belongs to the login
 * session, which the service pool's connections share and renew.
 */
export class IggyGroups implements GroupMembership {
  readonly #link: MembershipLink;
  readonly #request: GroupRequest;

  /** @param connect dials and logs in the membership connection (again after it closed). */
  constructor(connect: () => Promise<Link>) {
    this.#link = new MembershipLink(connect);
    this.#request = this.#link.request;
  }

  /** Closes the membership connection: the server ends its memberships. */
  close(): Promise<void> {
    return this.#link.close();
  }

  async join(stream: string, topic: string, group: string): Promise<void> {
    await this.#request(GroupCode.CREATE, createGroupBody(stream, topic, group)).catch(
      (e) => ignore(e, GROUP_EXISTS),
    );
    await this.#request(GroupCode.JOIN, groupBody(stream, topic, group));
  }

  async members(stream: string, topic: string, group: string): Promise<number> {
    return decodeMembers(await this.#request(GroupCode.GET, groupBody(stream, topic, group)));
  }

  async assigned(stream: string, topic: string, group: string): Promise<number[] | null> {
    return decodeSync(await this.#request(GroupCode.SYNC, groupBody(stream, topic, group)));
  }

  async leave(stream: string, topic: string, group: string): Promise<void> {
    await this.#request(GroupCode.LEAVE, groupBody(stream, topic, group)).catch(
      (e) => ignore(e, GROUP_NOT_FOUND, MEMBER_NOT_FOUND),
    );
  }
}

/** Swallows the IggyErrors of `codes` (an expected answer); rethrows anything else. */
function ignore(e: unknown, ...codes: number[]): Uint8Array {
  if (e instanceof IggyError && codes.includes(e.code)) return new Uint8Array(0);
  throw e;
}

/**
 * The membership connection: dialled and logged in on first use, and again once it closed (a
 * new session, which is a member of nothing: `assigned` then answers null).
 */
export class MembershipLink {
  readonly #connect: () => Promise<Link>;
  #link: Promise<Link> | null = null;
  #closed = false;

  constructor(connect: () => Promise<Link>) {
    this.#connect = connect;
  }

  readonly request: GroupRequest = async (code, body) => {
    if (this.#closed) throw new Error("the consumer group connection is closed");
    let link = await this.#current();
    if (link.isClosed) {
      this.#link = null;
      link = await this.#current();
    }
    return await link.request(code, body);
  };

  #current(): Promise<Link> {
    const p = this.#link ??= this.#connect();
    p.catch(() => {
      if (this.#link === p) this.#link = null; // the next request dials again
    });
    return p;
  }

  /** Closes the connection: the server ends its memberships. */
  async close(): Promise<void> {
    this.#closed = true;
    const p = this.#link;
    this.#link = null;
    const link = await p?.catch(() => undefined);
    await link?.close();
  }
}
