/**
 * The gateway's watch on the wall clock (`ClockWatch`): the looks that notice a step, its log
 * line and counter, and the clock ledger's run.
 *
 * @module
 */
import { wallClock } from "../base/wall_clock.ts";
import type { GatewayConfig } from "../config/types.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import { ClockLedger, clockLedgerPath } from "./clock_ledger.ts";
import { newestStored } from "./newest_stored.ts";
import type { LogBackend } from "./port.ts";

/** How often the wall clock is compared with the monotonic one when nothing else reads it (ms). */
const CLOCK_LOOK_MS = 1_000;

/**
 * The wall clock's watch: a look every second (a step is noticed within one), each step logged
 * at warn with its size and direction and counted in `clock_jumps_total`; with an embedded
 * store (embedded and forward modes) the clock ledger beside it keeps the age shifts across
 * restarts (`log/clock_ledger.ts`), read before the store opens (nothing is aged before) and
 * written once it has. Iggy mode has no ledger: a step is made up for while the gateway runs,
 * not after a restart.
 */
export class ClockWatch {
  #ledger: ClockLedger | null;
  readonly #logger: Logger;
  readonly #timer: ReturnType<typeof setInterval>;
  readonly #unwatch: () => void;

  private constructor(ledger: ClockLedger | null, logger: Logger, unwatch: () => void) {
    this.#ledger = ledger;
    this.#logger = logger;
    this.#unwatch = unwatch;
    this.#timer = setInterval(() => wallClock.now(), CLOCK_LOOK_MS);
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** Starts watching and reads the ledger (before the store opens). */
  static async open(
    c: GatewayConfig,
    logger: Logger,
    metrics: GatewayMetrics,
  ): Promise<ClockWatch> {
    const jumps = metrics.registry.counter("clock_jumps_total", "Steps of the wall clock seen");
    const unwatch = wallClock.onJump((jump) => {
      const direction = jump.stepMs > 0 ? "forward" : "backward";
      jumps.inc({ direction });
      logger.limited("warn", "Wall clock jumped; ages count the time that actually passed", {
        direction,
        step_s: Math.round(Math.abs(jump.stepMs) / 1000),
        from: new Date(jump.atMs - jump.stepMs).toISOString(),
        to: new Date(jump.atMs).toISOString(),
      });
    });
    const ledger = c.gateway.backend === "iggy"
      ? null
      : await ClockLedger.read(clockLedgerPath(c.embedded.path), wallClock, logger);
    return new ClockWatch(ledger, logger, unwatch);
  }

  /**
   * Writes the ledger for this run (the store is open); one that cannot be is logged, done
   * without. With no ledger read, `store`'s newest message is judged first, as the last sighting.
   */
  async start(store: LogBackend): Promise<void> {
    if (this.#ledger?.missing) await this.#judgeStore(this.#ledger, store);
    try {
      await this.#ledger?.start();
    } catch (err) {
      this.#logger.warn("Cannot write the clock ledger; a restart ages by stored timestamps", {
        error: err instanceof Error ? err.message : String(err),
      });
      this.#ledger = null;
    }
  }

  async #judgeStore(ledger: ClockLedger, store: LogBackend): Promise<void> {
    try {
      const found = await newestStored(store);
      if (found.unread > 0) {
        this.#logger.info(
          "No clock ledger: the store's newest message is judged by some partitions",
          {
            read: found.partitions,
            unread: found.unread,
          },
        );
      }
      if (found.newestMs !== null) ledger.judgeByNewestStored(found.newestMs, this.#logger);
    } catch (err) {
      this.#logger.warn(
        "No clock ledger and the store's newest message cannot be read; ages count from stored timestamps",
        {
          error: err instanceof Error ? err.message : String(err),
        },
      );
    }
  }

  /** Ends the looks and records the stop in the ledger. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#unwatch();
    await this.#ledger?.close();
  }
}
