/**
 * Iggy mode's uplink: the Iggy backend itself. Its connections reconnect on their own; this
 * looks at its health once a second and reports into one {@link Uplink}, so a lost Iggy, at
 * start or mid-run, is one `Uplink down` and one `Uplink up` in the log however many
 * connections and requests saw it.
 *
 * @module
 */
import type { Logger } from "../observe/logger.ts";
import { Uplink, type UplinkBacklog } from "../observe/uplink.ts";

export type { Uplink } from "../observe/uplink.ts";
import type { LogBackend } from "./port.ts";

/** How often the backend's health is looked at (ms). */
const CHECK_EVERY_MS = 1_000;

/** Watches a remote backend's connection; start after the backend is opened. */
export class BackendUplink {
  readonly state: Uplink;
  readonly #backend: LogBackend;
  readonly #every: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    backend: LogBackend,
    name: string,
    logger: Logger,
    waiting: () => number,
    checkEveryMs = CHECK_EVERY_MS,
  ) {
    this.#backend = backend;
    // Appends in flight are what waits; their bytes are not counted on this side.
    const backlog = (): UplinkBacklog => ({ messages: waiting(), bytes: 0, oldestMicros: null });
    this.state = new Uplink({ name, backlog }, logger);
    this.#every = checkEveryMs;
  }

  /** Reports the health now, then once every interval until {@link stop}. */
  start(): void {
    this.check();
    this.#timer ??= setInterval(() => this.check(), this.#every);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** One look at the backend's health. */
  check(): void {
    const health = this.#backend.health();
    if (health.ready) this.state.reached(health.detail ?? "");
    else this.state.down(health.reason ?? "not connected");
    this.state.sample();
  }
}

/** The uplink watch of a backend that has one (Iggy), or null (the embedded log). */
export function backendUplink(
  backend: LogBackend,
  iggy: { readonly address: string },
  logger: Logger,
  appends: { readonly pending: number },
): BackendUplink | null {
  if (backend.kind !== "iggy") return null;
  return new BackendUplink(backend, `Iggy at ${iggy.address}`, logger, () => appends.pending);
}
