/**
 * Takeover across gateways [MQTT-3.1.4-2]: gateways sharing one Iggy hand client ids over
 * through claims in the stored-session record topic (`claim_record.ts`).
 *
 * - Every accepted CONNECT appends a claim (its nonce, principal, Clean Start): one small
 *   append per CONNECT, which the CONNACK does not wait for (but for the resume below).
 * - Every gateway reads the topic's tail every `session.claim_poll_interval_ms`. A claim from
 *   another gateway on an id held live here closes that connection (MQTT 5: DISCONNECT 0x8E
 *   Session taken over), logged; its stored session goes over without an offline record, its
 *   positions are stored, then a release naming the claim is appended. Only a claim of the same
 *   principal takes a connection over (`client_id_owner.ts`): another principal's is answered
 *   with a refusal, and the gateway that accepted it closes that connection when it reads the
 *   refusal (MQTT 5: DISCONNECT 0x87 Not authorized), logged and counted; the owner's stays.
 * - Of two claims, the later in the log wins: a connection whose own claim has not been read
 *   back yet is newer than any claim read before it, and is not taken over by it.
 * - A CONNECT resuming a stored session whose record says it is connected elsewhere waits for
 *   the release before it resumes, at most `session.takeover_wait_ms` (the holder may be gone:
 *   it then resumes from the positions last stored, logged).
 * - Wills follow the spec where the connection ended: the closed connection's will goes as at
 *   any takeover; a delayed will held here for the id is cancelled by a claim without Clean
 *   Start and sent at once by one with it (`WillPublisher.reconnected`).
 *
 * @module
 */
import type { Principal } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { claimRecordOf, H_CLAIM, refusalRecordOf } from "../stored/claim_record.ts";
import { releaseRecordOf } from "../stored/claim_record.ts";
import type { ClaimRecord, ParsedClaim, RefusalRecord } from "../stored/claim_record.ts";
import type { ConnectionRegistry, Registered } from "./registry.ts";
import type { SessionRequest } from "./requested_session.ts";
import type { StoredSessions } from "./stored_sessions.ts";
import type { ClaimSink } from "./session_record_log.ts";
import type { WillPublisher } from "./will.ts";

/** A connection's own claim of its client id. */
export class LocalClaim {
  /** Read back from the log: a claim read from now on is later than this one. */
  seen = false;
  /** A later claim read while this one's CONNECT waited: the connection goes as soon as made. */
  supersededBy: ClaimRecord | null = null;
  constructor(readonly nonce: string) {}
}

/** What the watch works with. */
export interface ClaimWatchDeps {
  readonly registry: ConnectionRegistry;
  readonly sessions: StoredSessions;
  readonly wills: WillPublisher;
  readonly metrics: Pick<GatewayMetrics, "takeovers" | "clientIdRefused">;
  readonly logger: Logger;
  /** Resolves when the stored sessions' position stores asked so far are answered. */
  readonly positionsStored: () => Promise<void>;
  /** This gateway's `gateway.id`. */
  readonly gatewayId: string;
  /** How often the record topic is read (`session.claim_poll_interval_ms`). */
  readonly pollIntervalMs: number;
  /** The longest a resume waits for the holder's release (`session.takeover_wait_ms`). */
  readonly waitMs: number;
}

/** Claims of client ids written and read; one per gateway in Iggy mode. */
export class ClaimWatch implements ClaimSink {
  readonly #d: ClaimWatchDeps;
  /** This gateway's claims not read back yet, by nonce. */
  readonly #unseen = new Map<string, LocalClaim>();
  /** Claims whose CONNECT is not yet through {@link announce}, by client id. */
  readonly #announcing = new Map<string, LocalClaim>();
  /** Resumes waiting for a release, by their claim's nonce. */
  readonly #waiting = new Map<string, () => void>();
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(deps: ClaimWatchDeps) {
    this.#d = deps;
  }

  /** Reads claims from now on (after the stored sessions were loaded: older ones are past). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#d.sessions.records.claims = this;
    this.#timer = setInterval(() => void this.#d.sessions.sync(), this.#d.pollIntervalMs);
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const release of this.#waiting.values()) release();
  }

  /**
   * Claims `clientId` for an accepted CONNECT: appends the claim and, when the stored session
   * to resume is connected elsewhere, waits for its release (bounded); otherwise resolves at
   * once, the append under way. Resolves with the claim for the connection to hold; a claim
   * that could not be written is logged and holds nothing back (the connection is then taken
   * over by any claim).
   */
  async announce(clientId: string, principal: Principal, req: SessionRequest): Promise<LocalClaim> {
    const claim = new LocalClaim(crypto.randomUUID());
    const s = this.#d.sessions.get(clientId);
    const heldElsewhere = req.store && !req.cleanStart && s !== undefined &&
      s.offlineSinceMs === null && this.#d.registry.holder(clientId) === undefined;
    const record = claimRecordOf({
      nonce: claim.nonce,
      owner: principal.username,
      cleanStart: req.cleanStart,
      gateway: this.#d.gatewayId,
    });
    this.#unseen.set(claim.nonce, claim);
    const released = heldElsewhere ? this.#released(claim.nonce) : null;
    const written = this.#d.sessions.records.write(clientId, record, H_CLAIM).then((ok) => {
      if (ok) return;
      this.#unseen.delete(claim.nonce);
      this.#waiting.get(claim.nonce)?.();
      claim.seen = true;
    });
    // Nothing to wait for: the CONNACK does not wait for the append either (the claim goes out
    // with it, and whichever comes later in the log wins).
    if (released === null) return claim;
    this.#announcing.set(clientId, claim);
    await written;
    const got = await released;
    if (this.#announcing.get(clientId) === claim) this.#announcing.delete(clientId);
    if (!got) {
      this.#d.logger.limited("warn", "Takeover: no release from the session's gateway in time", {
        client_id: clientId,
        waited_ms: this.#d.waitMs,
        resumes_from: "the positions last stored",
      });
    }
    return claim;
  }

  /** Resolves true on the release of claim `nonce`, false after `waitMs` without it. */
  #released(nonce: string): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), this.#d.waitMs);
      const done = (got: boolean) => {
        clearTimeout(timer);
        this.#waiting.delete(nonce);
        resolve(got);
      };
      this.#waiting.set(nonce, () => done(true));
    });
  }

  /** A claim or release read from the record topic (ClaimSink). */
  claim(clientId: string, c: Exclude<ParsedClaim, { kind: "unknown" }>, own: boolean): void {
    if (c.kind === "released") return this.#waiting.get(c.nonce)?.();
    if (c.kind === "refused") return this.#refused(clientId, c);
    if (own) {
      const mine = this.#unseen.get(c.nonce);
      if (mine !== undefined) mine.seen = true;
      this.#unseen.delete(c.nonce);
      return;
    }
    const waiting = this.#announcing.get(clientId);
    if (waiting?.seen) waiting.supersededBy = c; // later than a CONNECT still waiting here
    const holder = this.#d.registry.holder(clientId);
    if (holder?.claim != null && !holder.claim.seen) return; // the connection here is newer
    if (holder !== undefined && holder.ownerName !== c.owner) return this.#foreign(clientId, c);
    if (holder !== undefined) this.#takeOver(clientId, holder, c);
    this.#d.wills.reconnected(clientId, c.cleanStart);
  }

  /**
   * A connection made after waiting for a release, whose claim a later one superseded meanwhile
   * (its CONNACK sent): taken over at once, as it would have been had it been made in time.
   */
  superseded(clientId: string, holder: Registered, claim: LocalClaim): void {
    if (claim.supersededBy !== null) this.#takeOver(clientId, holder, claim.supersededBy);
  }

  /** Closes the connection here for `c`'s; releases the session once its positions are stored. */
  #takeOver(clientId: string, holder: Registered, c: ClaimRecord): void {
    const d = this.#d;
    if (holder.session != null) d.sessions.handedOver(clientId);
    d.registry.takenOverElsewhere(clientId, c.gateway);
    d.metrics.takeovers.inc();
    d.logger.info("Session taken over through another gateway", {
      client_id: clientId,
      peer: holder.remoteAddress,
      by_gateway: c.gateway,
    });
    const release = () => d.sessions.records.write(clientId, releaseRecordOf(c.nonce), H_CLAIM);
    d.positionsStored().then(release, release);
  }

  /** Another principal claimed an id held here: the connection stays; the claim is refused. */
  #foreign(clientId: string, c: ClaimRecord): void {
    const owner = this.#d.registry.holder(clientId)?.ownerName ?? "";
    void this.#d.sessions.records.write(clientId, refusalRecordOf(c.nonce, owner), H_CLAIM);
  }

  /** Our claim was refused by the id's owner elsewhere: its connection here is closed. */
  #refused(clientId: string, r: RefusalRecord): void {
    const holder = this.#d.registry.holder(clientId);
    if (holder?.claim?.nonce !== r.nonce) return; // gone meanwhile
    this.#d.metrics.clientIdRefused.inc({ reason: "owned_by_another" });
    this.#d.logger.limited("warn", "Client id refused: another principal holds it elsewhere", {
      client_id: clientId,
      principal: holder.ownerName === "" ? "(anonymous)" : holder.ownerName ?? "",
      owner: r.owner === "" ? "(anonymous)" : r.owner,
    });
    // As if refused at CONNECT: no will, and the session it made (it could resume none: the
    // owner's CONNECT would have been refused) is removed.
    holder.discardWill?.();
    const why = `client id "${clientId}" belongs to another principal`;
    if (holder.disconnect) holder.disconnect(0x87, why);
    else holder.close(why);
    if (holder.session != null) this.#d.sessions.remove(clientId);
  }
}
