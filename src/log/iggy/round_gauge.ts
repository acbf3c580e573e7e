/**
 * Whether a balanced lane should wait, after a send, for the round that send confirmed.
 *
 * Under QoS 1 the devices are a closed loop: the messages of a confirmed send are PUBACKed
 * and the devices' next messages come back one round later. When the lane sends at once
 * whatever is queued, the in-flight window splits into two halves that take turns (one half
 * travels the loop while Iggy stores the other), and every send carries half the window.
 * Waiting for the round instead lets one send carry the whole window, at the cost of the
 * round's time with nothing at Iggy. That pays when a send costs Iggy about the same however
 * many messages it carries and takes longer than the round (Iggy 0.9 fsync topics: a shard's
 * sends run one after another, two fdatasyncs each), and loses otherwise.
 *
 * Which of the two holds depends on the server, the topic and the load, so the gauge measures
 * rather than guesses. It counts the messages confirmed per millisecond over windows of sends,
 * uses the way that did better (waiting must do clearly better), and every so many windows
 * tries the other one so that both figures stay fresh. Each way's figure is the median of its
 * last three windows: one window of a noisy host (or of the first second, with the load still
 * starting) neither decides nor lingers, and until both ways have three the gauge tries the
 * one with fewer. It waits only while the round comes back quicker than a send takes.
 *
 * @module
 */

/** The longest wait for a round (ms), however slow sends are. */
export const MAX_ROUND_WAIT_MS = 5;
/** Sends per measuring window. */
export const WINDOW_SENDS = 64;
/** Every this many windows the lane tries the way it is not using. */
export const WINDOWS_BETWEEN_TRIES = 16;
/** How much more throughput waiting must give to be kept (1.1 = 10% more). */
export const WAIT_MARGIN = 1.1;
/** Windows kept per way; its figure is their median. */
export const WAY_SAMPLES = 3;

/**
 * A send leaving this long (ms) after the previous one was confirmed ends an idle spell: the
 * round watched and the window begun are dropped rather than measured across it.
 */
export const IDLE_MS = 100;

/** Weight of a new sample in the moving averages of send and round times. */
const ALPHA = 1 / 8;

interface Watch {
  readonly since: number;
  readonly need: number;
  got: number;
}

/** Send and round times of one lane; times in ms from one clock (`performance.now()`). */
export class RoundGauge {
  #sendMs = 0;
  #roundMs = 0;
  #watch: Watch | undefined;
  #waiting = false;
  /** Messages per ms of each way's last windows, newest last. */
  readonly #atOnceRates: number[] = [];
  readonly #waitRates: number[] = [];
  #windows = 0;
  #windowStart = 0;
  #windowSends = 0;
  #windowMessages = 0;
  #lastSent = 0;

  /** A send of `count` messages was confirmed at `now`, `ms` after it left. */
  sent(count: number, ms: number, now: number): void {
    if (this.#lastSent > 0 && now - ms - this.#lastSent > IDLE_MS) {
      this.#watch = undefined;
      this.#windowSends = 0;
      this.#windowMessages = 0;
    }
    this.#lastSent = now;
    // The previous round not back by now: it takes at least this long.
    if (this.#watch) this.#roundMs = average(this.#roundMs, now - this.#watch.since);
    this.#sendMs = average(this.#sendMs, ms);
    this.#watch = { since: now, need: count, got: 0 };
    this.#measure(count, now);
  }

  /** `count` messages joined the lane at `now`. */
  arrived(count: number, now: number): void {
    const w = this.#watch;
    if (!w) return;
    w.got += count;
    if (w.got < w.need) return;
    this.#roundMs = average(this.#roundMs, now - w.since);
    this.#watch = undefined;
  }

  /** How long to wait for the round after a send (0: send what is queued at once). */
  waitMs(): number {
    return this.#waiting ? Math.min(this.#sendMs, MAX_ROUND_WAIT_MS) : 0;
  }

  #measure(count: number, now: number): void {
    if (this.#windowSends === 0) this.#windowStart = now - this.#sendMs;
    this.#windowSends++;
    this.#windowMessages += count;
    if (this.#windowSends < WINDOW_SENDS) return;
    const rate = this.#windowMessages / Math.max(now - this.#windowStart, 1e-3);
    this.#windowSends = 0;
    this.#windowMessages = 0;
    const rates = this.#waiting ? this.#waitRates : this.#atOnceRates;
    rates.push(rate);
    if (rates.length > WAY_SAMPLES) rates.shift();
    // The better way so far; the other while it has fewer windows, and now and then after.
    const waitIsBetter = median(this.#waitRates) > median(this.#atOnceRates) * WAIT_MARGIN;
    const other = waitIsBetter ? this.#atOnceRates : this.#waitRates;
    const periodic = ++this.#windows % WINDOWS_BETWEEN_TRIES === 1;
    const tryOther = other.length < WAY_SAMPLES || periodic;
    const roundIsQuicker = this.#roundMs > 0 && this.#roundMs < this.#sendMs;
    this.#waiting = waitIsBetter !== tryOther && roundIsQuicker;
  }
}

function average(mean: number, sample: number): number {
  return mean === 0 ? sample : mean + (sample - mean) * ALPHA;
}

/** The median of up to three figures (two: their mean; none: 0, not measured). */
function median(xs: readonly number[]): number {
  if (xs.length < 3) return xs.length === 0 ? 0 : (xs[0] + xs[xs.length - 1]) / 2;
  const [a, b, c] = xs;
  return Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
}
