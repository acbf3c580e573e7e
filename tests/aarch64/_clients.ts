/**
 * The real MQTT clients of the aarch64 smoke, run natively on the host: Mosquitto's
 * `mosquitto_pub`/`mosquitto_sub` for single messages, and a small QoS 1 load from MQTT.js that
 * records exactly which messages got a PUBACK.
 *
 * @module
 */
import mqtt from "mqtt";
import { until } from "./_emulated.ts";

const HOST = "127.0.0.1";

/** A finished mosquitto_pub: its debug output (`-d`) and exit code. */
export interface Published {
  readonly code: number;
  readonly output: string;
}

/**
 * `mosquitto_pub -d -q QOS -t TOPIC -m PAYLOAD`: for QoS 1 it exits only after the PUBACK, and
 * its debug output says so ("received PUBACK"). With `cafile`, over TLS, trusting only it.
 */
export async function mosquittoPub(
  port: number,
  clientId: string,
  topic: string,
  payload: string,
  qos: 0 | 1,
  timeoutMs: number,
  cafile?: string,
): Promise<Published> {
  const child = new Deno.Command("mosquitto_pub", {
    args: ["-d", "-h", HOST, "-p", String(port), "-i", clientId, "-q", String(qos)]
      .concat(cafile === undefined ? [] : ["--cafile", cafile])
      .concat(["-t", topic, "-m", payload]),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, timeoutMs);
  const out = await child.output();
  clearTimeout(timer);
  const dec = new TextDecoder();
  return { code: out.code, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/**
 * `mosquitto_sub -d -v -q 1 -C COUNT -W SECONDS -t …`: a subscriber that exits after COUNT
 * messages (or fails after SECONDS). Its debug lines say when the SUBACK arrived.
 */
export class MosquittoSub {
  readonly #child: Deno.ChildProcess;
  #output = "";
  readonly #done: Promise<{ code: number; output: string }>;

  constructor(port: number, clientId: string, topics: string[], count: number, seconds: number) {
    // Line-buffered (coreutils' stdbuf): into a pipe its debug lines would otherwise sit in
    // stdio's buffer, and the SUBACK line is the barrier subscribed() waits for.
    this.#child = new Deno.Command("stdbuf", {
      args: [
        "-oL",
        "mosquitto_sub",
        "-d",
        "-v",
        "-h",
        HOST,
        "-p",
        String(port),
        "-i",
        clientId,
        "-q",
        "1",
      ]
        .concat(["-C", String(count), "-W", String(seconds)])
        .concat(topics.flatMap((t) => ["-t", t])),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const read = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) this.#output += chunk;
    };
    this.#done = Promise.all([
      read(this.#child.stdout),
      read(this.#child.stderr),
      this.#child.status,
    ]).then(([, , s]) => ({ code: s.code, output: this.#output }));
  }

  /** Resolves once mosquitto_sub has its SUBACK (so later publishes reach it). */
  async subscribed(timeoutMs: number): Promise<void> {
    await until(() => this.#output.includes("received SUBACK"), timeoutMs, "mosquitto_sub's SUBACK")
      .catch((e) => {
        throw new Error(`${e.message}; mosquitto_sub said: ${this.#output.trim() || "(nothing)"}`);
      });
  }

  /** Its exit code and everything it printed, once it has exited. */
  done(): Promise<{ code: number; output: string }> {
    return this.#done;
  }

  /** SIGKILLs it if it still runs (cleanup). */
  kill(): void {
    try {
      this.#child.kill("SIGKILL");
    } catch { /* exited */ }
  }
}

/** Options of {@link Qos1Load}. */
export interface LoadOptions {
  readonly clients: number;
  /** QoS 1 publishes each client keeps in flight. */
  readonly window: number;
  /** The topic client `i` publishes to. */
  topic(i: number): string;
  /** Payloads are `PREFIX-CLIENT-SEQ`, unique across the run. */
  readonly prefix: string;
}

/**
 * A steady QoS 1 load: each MQTT.js client keeps `window` publishes in flight, and a payload
 * counts as acknowledged only when its PUBACK arrived (MQTT.js calls a QoS 1 publish's callback
 * without an error only then).
 */
export class Qos1Load {
  sent = 0;
  inflight = 0;
  readonly acked = new Set<string>();
  readonly #clients: mqtt.MqttClient[] = [];
  #running = true;

  private constructor() {}

  /** Connects every client (rejecting if one cannot), then starts publishing. */
  static async start(port: number, o: LoadOptions): Promise<Qos1Load> {
    const load = new Qos1Load();
    try {
      for (let i = 0; i < o.clients; i++) {
        const client = await mqtt.connectAsync(`mqtt://${HOST}:${port}`, {
          clientId: `${o.prefix}-${i}`,
          protocolVersion: 4,
          reconnectPeriod: 0,
          connectTimeout: 60_000,
          keepalive: 120,
        });
        client.on("error", () => {}); // a killed gateway resets the socket: expected
        load.#clients.push(client);
      }
    } catch (e) {
      await load.stop();
      throw e;
    }
    load.#clients.forEach((client, i) => load.#pump(client, i, o));
    return load;
  }

  #pump(client: mqtt.MqttClient, index: number, o: LoadOptions, seq = { n: 0 }, mine = { n: 0 }) {
    while (this.#running && client.connected && mine.n < o.window) {
      const payload = `${o.prefix}-${index}-${seq.n++}`;
      this.sent++;
      this.inflight++;
      mine.n++;
      client.publish(o.topic(index), payload, { qos: 1 }, (err) => {
        this.inflight--;
        mine.n--;
        if (!err) this.acked.add(payload);
        this.#pump(client, index, o, seq, mine);
      });
    }
  }

  /** Stops publishing and closes every client at once (in-flight publishes are abandoned). */
  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#clients.map((c) =>
      Promise.race([
        c.endAsync(true).catch(() => {}),
        new Promise((r) => setTimeout(r, 5000)),
      ])
    ));
  }
}
