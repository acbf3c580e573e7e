/**
 * The smoke's own store and config under `data/` (the only place `-P=gateway` may write), and
 * reading it back with the emulated `main.ts read --json`.
 *
 * @module
 */
import { type Emulator, runEmulated } from "./_emulated.ts";

/** The stream every smoke rule writes to. */
export const STREAM = "smoke";

/** The smoke's files, all in one directory under `data/`. */
export interface SmokeFiles {
  /** Relative to the repository root, as the gateway sees it. */
  readonly dir: string;
  readonly config: string;
  readonly map: string;
  /** The TLS listener's certificate and key (copies of the test fixtures). */
  readonly cert: string;
  readonly key: string;
}

/** The self-signed test certificates (localhost, 127.0.0.1); each is its own CA. */
export const TLS_FIXTURES = new URL("../fixtures/tls/", import.meta.url).pathname;

/** `smoke/<name>` → stream "smoke", topic TOPIC, partition key `<name>`. */
export function topicMap(topic: string): string {
  return `default_stream = "${STREAM}"
default_topic = "unmatched"

[[rule]]
mqtt_topic = 'smoke/(\\w+)'
stream = '${STREAM}'
topic = '${topic}'
partition_key = '$1'
`;
}

/**
 * Creates `data/aarch64-smoke-<random>/` with a config (loopback port 0 for MQTT, MQTT over TLS
 * and HTTP, anonymous from loopback, auto-create, the store in that directory), a topic map and
 * the TLS certificate `server.crt` (the gateway may read nothing outside `-P=gateway`'s paths).
 */
export async function createSmokeFiles(root: string): Promise<SmokeFiles> {
  const dir = `data/aarch64-smoke-${crypto.randomUUID().slice(0, 8)}`;
  await Deno.mkdir(`${root}${dir}`, { recursive: true });
  const files = {
    dir,
    config: `${dir}/gateway.toml`,
    map: `${dir}/topic-map.toml`,
    cert: `${dir}/tls-cert.pem`,
    key: `${dir}/tls-key.pem`,
  };
  await Deno.writeTextFile(`${root}${files.map}`, topicMap("before"));
  await installCertificate(root, files, "server");
  await Deno.writeTextFile(
    `${root}${files.config}`,
    `[gateway]
id = "aarch64-smoke"
log_level = "info"
drain_timeout_ms = 10_000

[listeners]
tcp = "127.0.0.1:0"
tls = "127.0.0.1:0"
tls_cert_file = "${files.cert}"
tls_key_file = "${files.key}"
http = "127.0.0.1:0"

[auth]
allow_anonymous = true
anonymous_sources = ["127.0.0.1", "::1"]

[mapping]
map_file = "${files.map}"

[log]
auto_create = true

[embedded]
path = "${dir}/gateway.db"

[limits]
# Every smoke client comes from 127.0.0.1.
max_connection_rate_per_source = 0
`,
  );
  return files;
}

/** Puts fixture NAME (`server` or `server2`) in place as the listener's certificate and key. */
export async function installCertificate(
  root: string,
  files: SmokeFiles,
  name: "server" | "server2",
): Promise<void> {
  await Deno.copyFile(`${TLS_FIXTURES}${name}.crt`, `${root}${files.cert}`);
  await Deno.copyFile(`${TLS_FIXTURES}${name}.key`, `${root}${files.key}`);
}

/** One message as `read --json` prints it. */
export interface ReadMessage {
  readonly partition: number;
  readonly offset: number;
  readonly headers: Record<string, string>;
  readonly payload: string;
}

/** `deno run -P=gateway main.ts read --json` of one topic, every partition, under emulation. */
export async function readTopic(
  emu: Emulator,
  files: SmokeFiles,
  topic: string,
  count: number,
  timeoutMs: number,
): Promise<ReadMessage[]> {
  const args = ["run", "-P=gateway", "main.ts", "read", "--config", files.config]
    .concat(["--stream", STREAM, "--topic", topic, "--count", String(count), "--json"]);
  const r = await runEmulated(emu, args, timeoutMs);
  if (r.code !== 0) throw new Error(`read exited with ${r.code}: ${r.stderr.trim()}`);
  return r.stdout.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
}

/** Acknowledged payloads missing from `stored`. */
export function missing(acked: Iterable<string>, stored: ReadMessage[]): string[] {
  const have = new Set(stored.map((m) => m.payload));
  return [...acked].filter((p) => !have.has(p));
}

/** How many payloads are stored more than once (allowed: QoS 1 is at least once). */
export function duplicates(stored: ReadMessage[]): number {
  const seen = new Map<string, number>();
  for (const m of stored) seen.set(m.payload, (seen.get(m.payload) ?? 0) + 1);
  return [...seen.values()].filter((n) => n > 1).length;
}
