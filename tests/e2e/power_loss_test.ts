/**
 * Power loss, simulated on a real disk. The gateway process (`deno run -P=gateway main.ts run`)
 * keeps its store on a loop-mounted ext4 (tests/helpers/small_disk.ts). A loop device's image
 * file holds only what the mounted filesystem sent down to its "disk": fsync and fdatasync,
 * journal commits, writeback. What the gateway wrote but did not sync is still in the mounted
 * filesystem's page cache and not in the image. So a copy of the image, taken while the gateway
 * is stopped (SIGSTOP) and the device has no write in flight, is the disk as a power cut at that
 * instant leaves it. `sync` is never called: it would put the page cache on the disk.
 *
 * Devices publish QoS 1 messages of 2 KiB, each its own partition, while two stored sessions
 * (MQTT 3.1.1 clean session 0 over a raw socket, MQTT 5 with a session expiry through MQTT.js)
 * subscribe to them all and acknowledge what they get; small segments make the log roll through
 * several segment files. The image is copied right after the stored sessions' SUBACKs and at
 * {@link CUTS} random moments of the load; the last cut is followed by SIGKILL. Each copy then
 * gets `e2fsck -fy` (replays ext4's journal) and is mounted: every message PUBACKed before the
 * cut is in the log, byte for byte, and each
 * device's stored messages are exactly the first ones it sent, in order, with no duplicate and
 * nothing it did not send. A gateway started on the copy brings the stored sessions back (session
 * present), delivers every stored message each had not acknowledged, and then the messages
 * published after the restart; those land after the old ones. The clock ledger the last run
 * wrote at its start reads back (before it was synced before its rename, a cut left it empty).
 *
 * What this does not model: a disk that acknowledges a flush it did not do, writes reordered or
 * torn inside the device, or a cut in the middle of an fsync (the copy waits for the device's
 * writes in flight to finish). Nor can it see a missing directory fsync: ext4 makes a new file's
 * name durable with the file's own fsync, and a rename with its next journal commit.
 *
 * Needs root to mount; skipped loudly elsewhere (SMALL_DISK_SKIP).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { connectPacket, publishPacket, subscribePacket, waitFor } from "../helpers/gateway.ts";
import { type GatewayProcess, spawnGateway } from "../helpers/process.ts";
import { openStoreReadOnly } from "../helpers/store.ts";
import {
  mountImage,
  mountSmallDisk,
  SMALL_DISK_NOTE,
  SMALL_DISK_SKIP,
  type SmallDisk,
} from "../helpers/small_disk.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEVICES = 4;
/** Messages each device sends in the run (2 KiB each: about 12 MiB in all). */
const PER_DEVICE = 1500;
const PAYLOAD_BYTES = 2048;
/** PUBLISHes each device keeps in flight. */
const IN_FLIGHT = 16;
const CUTS = Number(Deno.env.get("POWER_LOSS_CUTS") ?? 5);
/** Segments of 1 MiB, 2 MiB, then 3 MiB (an eighth of this): five or more files in the run. */
const MAX_STORE_BYTES = 24 * 1024 * 1024;
/** Messages each device publishes to the gateway started on a copy. */
const AFTER_RESTART = 50;
/** Sequence numbers after a restart start here: never sent before any cut. */
const RESTART_SEQ = 1_000_000;
/** Stored-session client ids: MQTT 3.1.1 (clean session 0) and MQTT 5 (a session expiry). */
const KEEPER = "power-loss-keeper";
const KEEPER5 = "power-loss-keeper-5";
/**
 * ext4's periodic journal commit (5 s) pushed out of the run: only the gateway's own fsyncs put
 * metadata on the disk (stricter), and no timed commit lands in the middle of a copy.
 */
const MOUNT_OPTIONS = "commit=600";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The bytes device `d` sends as message `seq`: its name and number, then noise. */
function payloadOf(d: number, seq: number): Uint8Array {
  const p = new Uint8Array(PAYLOAD_BYTES);
  const head = enc.encode(`pl-${d}:${seq}:`);
  p.set(head);
  let x = (Math.imul(d + 1, 0x9e3779b1) ^ Math.imul(seq + 1, 0x85ebca6b)) | 1;
  for (let i = head.length; i < p.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    p[i] = x & 0xff;
  }
  return p;
}

/** (device, seq) of a payload this test sent, checked byte for byte; throws otherwise. */
function identify(payload: Uint8Array, where: string): [number, number] {
  const m = /^pl-(\d+):(\d+):/.exec(dec.decode(payload.subarray(0, 32)));
  assert.ok(m, `${where}: a message this test never sent`);
  const [d, seq] = [Number(m[1]), Number(m[2])];
  assert.deepEqual(payload, payloadOf(d, seq), `${where}: pl-${d}:${seq} is not byte-identical`);
  return [d, seq];
}

function topicOf(d: number): string {
  return `sensors/pl-${d}/data`; // the map's key is the device: one partition's order
}

/** Reads MQTT packets off `conn` until it closes, handing each to `on` (type, flags, body). */
async function readPackets(
  conn: Deno.Conn,
  on: (type: number, flags: number, body: Uint8Array) => Promise<void> | void,
): Promise<void> {
  const chunk = new Uint8Array(256 * 1024);
  let buf = new Uint8Array(0);
  for (;;) {
    const n = await conn.read(chunk).catch(() => null);
    if (n === null) return;
    const merged = new Uint8Array(buf.length + n);
    merged.set(buf);
    merged.set(chunk.subarray(0, n), buf.length);
    buf = merged;
    let pos = 0;
    for (;;) {
      let len = 0;
      let i = pos + 1;
      for (let mult = 1; i < buf.length; i++, mult *= 128) {
        len += (buf[i] & 0x7f) * mult;
        if ((buf[i] & 0x80) === 0) break;
      }
      if (i >= buf.length || buf.length - (i + 1) < len) break;
      await on(buf[pos] >> 4, buf[pos] & 0xf, buf.subarray(i + 1, i + 1 + len));
      pos = i + 1 + len;
    }
    buf = buf.slice(pos);
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length;) done += await conn.write(bytes.subarray(done));
}

function closeQuietly(conn: Deno.Conn | undefined): void {
  try {
    conn?.close();
  } catch { /* closed */ }
}

/** A device: one connection, QoS 1, {@link IN_FLIGHT} in flight, sequence numbers in order. */
class Device {
  readonly index: number;
  /** Next sequence number to send; everything below was sent. */
  next: number;
  readonly acked = new Set<number>();
  #conn: Deno.Conn | undefined;

  constructor(index: number, first = 0) {
    this.index = index;
    this.next = first;
  }

  /** Sends up to `last` (exclusive); resolves when all are PUBACKed or the connection closes. */
  async run(port: number, last: number): Promise<void> {
    const conn = this.#conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const unacked = new Map<number, number>(); // packet id → seq
    const fill = async () => {
      while (unacked.size < IN_FLIGHT && this.next < last) {
        const seq = this.next++;
        const pid = (seq % 65535) + 1;
        unacked.set(pid, seq);
        await writeAll(
          conn,
          publishPacket(topicOf(this.index), payloadOf(this.index, seq), 1, pid),
        );
      }
      if (unacked.size === 0) closeQuietly(conn);
    };
    try {
      await writeAll(conn, connectPacket(`pl-device-${this.index}`));
      await readPackets(conn, async (type, _flags, body) => {
        if (type === 2) assert.equal(body[1], 0, "CONNACK accepted");
        if (type === 4) {
          const pid = (body[0] << 8) | body[1];
          const seq = unacked.get(pid);
          if (seq !== undefined) this.acked.add(seq);
          unacked.delete(pid);
        }
        if (type === 2 || type === 4) await fill().catch(() => closeQuietly(conn));
      });
    } finally {
      closeQuietly(conn);
    }
  }

  stop(): void {
    closeQuietly(this.#conn);
  }
}

/** A stored session subscribed with QoS 1 to every device's topic; PUBACKs what it gets. */
interface Keeper {
  readonly name: string;
  /** "d:seq" of every message PUBACKed to the gateway. */
  readonly acked: Set<string>;
  /** What this connection received, in order, per device. */
  readonly received: Map<number, number[]>;
  readonly sessionPresent: boolean | undefined;
  readonly subscribed: boolean;
  /** Connects (and subscribes); resolves when the connection has closed. */
  run(port: number, subscribe: boolean): Promise<void>;
  stop(): void;
}

/** Notes a message a keeper got (and acknowledges, or is about to). */
function noteReceived(k: Keeper, payload: Uint8Array): void {
  const [d, seq] = identify(payload, k.name);
  const list = k.received.get(d) ?? [];
  k.received.set(d, list);
  list.push(seq);
  k.acked.add(`${d}:${seq}`);
}

/** The MQTT 3.1.1 stored session (clean session 0), over a raw socket. */
class Keeper311 implements Keeper {
  readonly name = KEEPER;
  readonly acked = new Set<string>();
  readonly received = new Map<number, number[]>();
  sessionPresent: boolean | undefined;
  subscribed = false;
  #conn: Deno.Conn | undefined;

  async run(port: number, subscribe: boolean): Promise<void> {
    const conn = this.#conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await writeAll(conn, connectPacket(KEEPER, { clean: false }));
      await readPackets(conn, async (type, flags, body) => {
        if (type === 2) {
          assert.equal(body[1], 0, "the keeper's CONNACK accepted");
          this.sessionPresent = (body[0] & 1) === 1;
          if (subscribe) await writeAll(conn, subscribePacket(1, [["sensors/+/data", 1]]));
        }
        if (type === 9) {
          assert.equal(body[2], 1, "SUBACK grants QoS 1");
          this.subscribed = true;
        }
        if (type !== 3) return;
        const qos = (flags >> 1) & 3;
        const tlen = (body[0] << 8) | body[1];
        const pid = (body[2 + tlen] << 8) | body[3 + tlen];
        assert.equal(qos, 1, "the keeper gets QoS 1");
        noteReceived(this, body.subarray(4 + tlen));
        await writeAll(conn, new Uint8Array([0x40, 2, pid >> 8, pid & 0xff]));
      });
    } finally {
      closeQuietly(conn);
    }
  }

  stop(): void {
    closeQuietly(this.#conn);
  }
}

/**
 * The MQTT 5 stored session (Session Expiry Interval of an hour), through MQTT.js, which
 * PUBACKs each message as it hands it over.
 */
class Keeper5 implements Keeper {
  readonly name = KEEPER5;
  readonly acked = new Set<string>();
  readonly received = new Map<number, number[]>();
  sessionPresent: boolean | undefined;
  subscribed = false;
  #client: mqtt.MqttClient | undefined;

  run(port: number, subscribe: boolean): Promise<void> {
    const client = this.#client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
      protocolVersion: 5,
      clientId: KEEPER5,
      clean: false,
      reconnectPeriod: 0,
      properties: { sessionExpiryInterval: 3600 },
    });
    const failed = Promise.withResolvers<void>();
    client.on("connect", (ack) => {
      this.sessionPresent = ack.sessionPresent;
      if (!subscribe) return;
      client.subscribeAsync("sensors/+/data", { qos: 1 }).then((granted) => {
        assert.equal(granted[0]?.qos, 1, "SUBACK grants QoS 1");
        this.subscribed = true;
      }).catch(failed.reject);
    });
    client.on("message", (_topic, payload) => {
      try {
        noteReceived(this, new Uint8Array(payload)); // a Buffer: compared as bytes
      } catch (e) {
        failed.reject(e);
      }
    });
    client.on("error", () => {}); // a connection the gateway's kill ended: "close" follows
    const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
    return Promise.race([closed.then(() => client.endAsync(true)), failed.promise]);
  }

  stop(): void {
    this.#client?.end(true);
  }
}

/** Keeps a client's run: handled now, its failure thrown by {@link clientsEnded}. */
function track(running: Promise<void>[], run: Promise<void>): void {
  run.catch(() => {});
  running.push(run);
}

/** Waits for the clients to end; a check one of them failed (a payload not as sent) fails. */
async function clientsEnded(running: Promise<void>[]): Promise<void> {
  for (const r of await Promise.allSettled(running)) {
    if (r.status === "rejected") throw r.reason;
  }
}

/** A cut: the image as the disk held it, and what the clients knew then. */
interface Snapshot {
  readonly image: string;
  /** Per device: sequence numbers PUBACKed before the cut, and how many were sent. */
  readonly acked: Set<number>[];
  readonly sent: number[];
  /** Per keeper: what it had acknowledged. */
  readonly keeperAcked: Set<string>[];
}

async function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return { code: r.code, out: dec.decode(r.stdout) + dec.decode(r.stderr) };
}

/**
 * Waits until every thread of `pid` is stopped (a thread inside an fsync finishes it first:
 * its state is D until then) and the loop device has no request in flight: the image then
 * holds a disk state, not one half-written.
 */
async function quiesced(pid: number, device: string): Promise<void> {
  await waitFor(
    async () => {
      for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
        const stat = await Deno.readTextFile(`/proc/${pid}/task/${t.name}/stat`).catch(() => "");
        const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
        if (state !== "" && state !== "T" && state !== "t" && state !== "Z") return false;
      }
      const inflight = await Deno.readTextFile(`/sys/block/${device}/inflight`);
      return inflight.trim().split(/\s+/).every((n) => n === "0");
    },
    10_000,
    "the stopped gateway's threads and the loop device to be idle",
  );
}

/** Stops the gateway, copies the image (the disk at this instant), and resumes or kills it. */
async function cut(
  gw: GatewayProcess,
  disk: SmallDisk,
  image: string,
  devices: Device[],
  keepers: Keeper[],
  resume: boolean,
): Promise<Snapshot> {
  gw.child.kill("SIGSTOP");
  await quiesced(gw.child.pid, await disk.device());
  const copied = await run("cp", ["--sparse=always", disk.image, image]);
  assert.equal(copied.code, 0, copied.out);
  // PUBACKs read until now left the gateway before SIGSTOP, so after their fsync.
  const snapshot = {
    image,
    acked: devices.map((d) => new Set(d.acked)),
    sent: devices.map((d) => d.next),
    keeperAcked: keepers.map((k) => new Set(k.acked)),
  };
  gw.child.kill(resume ? "SIGCONT" : "SIGKILL");
  return snapshot;
}

/** Every message of the devices' partitions, in log order per device. */
async function readBack(db: string): Promise<Map<number, number[]>> {
  const store = await openStoreReadOnly(db);
  const stored = new Map<number, number[]>(Array.from({ length: DEVICES }, (_, d) => [d, []]));
  try {
    const info = await store.getTopic("sensors", "sensor_data");
    assert.ok(info, "the devices' topic exists");
    for (let p = 0; p < info.partitions; p++) {
      const address = { stream: "sensors", topic: "sensor_data", partition: p };
      for (let from = 0;;) {
        const msgs = await store.poll(address, from, 1000);
        if (msgs.length === 0) break;
        for (const m of msgs) {
          const [d, seq] = identify(m.payload, `${db}, offset ${m.offset}`);
          stored.get(d)!.push(seq);
        }
        from = msgs[msgs.length - 1].offset + 1;
      }
    }
  } finally {
    await store.close();
  }
  return stored;
}

/**
 * Each device's stored messages are its first `kept` ones, in order, once each (a log cut at a
 * power loss keeps a prefix of each partition), then `after` (published after a restart);
 * `kept` covers everything PUBACKed and nothing unsent. Returns `kept` per device.
 */
function checkStored(
  stored: Map<number, number[]>,
  snap: Snapshot,
  when: string,
  after: number[] = [],
): number[] {
  return snap.sent.map((sent, d) => {
    const seqs = stored.get(d)!;
    const old = seqs.filter((s) => s < RESTART_SEQ);
    const kept = old.length;
    assert.deepEqual(old, Array.from({ length: kept }, (_, i) => i), `${when}: pl-${d} in order`);
    assert.ok(kept <= sent, `${when}: pl-${d} has ${kept} stored, only ${sent} sent`);
    const lost = [...snap.acked[d]].filter((s) => s >= kept).sort((a, b) => a - b);
    assert.deepEqual(
      lost,
      [],
      `${when}: ${lost.length} of the ${snap.acked[d].size} PUBACKed messages of pl-${d} lost`,
    );
    assert.deepEqual(seqs.slice(kept), after, `${when}: pl-${d} after the restart`);
    return kept;
  });
}

/**
 * What a keeper must get back on the restarted gateway: every stored message it had not
 * acknowledged before the cut, then every new one; its catch-up may repeat acknowledged ones
 * (QoS 1), but each device's messages come in order. Returns what it was owed and got.
 */
async function keeperOwed(
  k: Keeper,
  owed: number[][],
  when: string,
): Promise<string> {
  const missing = () =>
    owed.flatMap((list, d) => {
      const got = new Set(k.received.get(d) ?? []);
      return list.filter((s) => !got.has(s)).map((s) => `pl-${d}:${s}`);
    });
  await waitFor(() => missing().length === 0, 20_000, `${when}: ${k.name}'s messages`)
    .catch((e) => {
      throw new Error(`${e.message}; missing ${missing().length}: ${missing().slice(0, 5)}`);
    });
  for (const [d, seqs] of k.received) {
    for (let i = 1; i < seqs.length; i++) {
      const [a, b] = [seqs[i - 1], seqs[i]];
      assert.ok(b > a, `${when}: ${k.name} got pl-${d}:${b} after ${a}`);
    }
  }
  const owedOld = owed.reduce((n, list) => n + list.filter((s) => s < RESTART_SEQ).length, 0);
  const got = [...k.received.values()].reduce((n, list) => n + list.length, 0);
  return `${k.name} was owed ${owedOld} stored, got ${got} with the new`;
}

/** A gateway on the copy: the sessions are back, owed messages come, new ones land after. */
async function restartOn(
  db: string,
  snap: Snapshot,
  kept: number[],
  when: string,
): Promise<string> {
  const gw = await spawnGateway(gatewayEnv(db));
  // The ledger the last run wrote at its start survived (written, synced, renamed, synced).
  const ledger = gw.output.join("").split("\n").find((l) => /[Cc]lock ledger/.test(l));
  assert.equal(ledger, undefined, `${when}: the clock ledger`);
  const keepers: Keeper[] = [new Keeper311(), new Keeper5()];
  const devices = Array.from({ length: DEVICES }, (_, d) => new Device(d, RESTART_SEQ));
  const running: Promise<void>[] = [];
  const news = Array.from({ length: AFTER_RESTART }, (_, i) => RESTART_SEQ + i);
  const reports: string[] = [];
  try {
    for (const k of keepers) {
      track(running, k.run(gw.port, false));
      await waitFor(() => k.sessionPresent !== undefined, 10_000, `${when}: ${k.name}'s CONNACK`);
      assert.equal(k.sessionPresent, true, `${when}: ${k.name}'s stored session is present`);
    }
    for (const d of devices) track(running, d.run(gw.port, RESTART_SEQ + AFTER_RESTART));
    for (const [i, k] of keepers.entries()) {
      const owed = kept.map((n, d) =>
        Array.from({ length: n }, (_, s) => s).filter((s) => !snap.keeperAcked[i].has(`${d}:${s}`))
          .concat(news)
      );
      reports.push(await keeperOwed(k, owed, when));
    }
    await waitFor(
      () => devices.every((d) => d.acked.size === AFTER_RESTART),
      10_000,
      `${when}: PUBACKs after the restart`,
    );
  } finally {
    for (const k of keepers) k.stop();
    for (const d of devices) d.stop();
    const stopped = await gw.stop();
    await clientsEnded(running);
    assert.equal(stopped.code, 0, `${when}: the gateway stops cleanly`);
  }
  checkStored(await readBack(`${ROOT}${db}`), snap, `${when}, after the restart`, news);
  return reports.join("; ");
}

function gatewayEnv(db: string): Record<string, string> {
  return {
    IGGY_MQTT_EMBEDDED_PATH: db,
    IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(MAX_STORE_BYTES),
  };
}

/**
 * Runs the devices and the keeper on a gateway; copies the disk right after the keeper's SUBACK
 * (cut 0) and at `CUTS` random moments of the load.
 */
async function runWithCuts(name: string, disk: SmallDisk): Promise<Snapshot[]> {
  const gw = await spawnGateway(gatewayEnv(`data/${name}/gateway.db`));
  const keepers: Keeper[] = [new Keeper311(), new Keeper5()];
  const devices = Array.from({ length: DEVICES }, (_, d) => new Device(d));
  const running: Promise<void>[] = [];
  const snapshots: Snapshot[] = [];
  try {
    for (const k of keepers) {
      track(running, k.run(gw.port, true));
      await waitFor(() => k.subscribed, 10_000, `${k.name}'s SUBACK`);
    }
    // Cut 0, right after the SUBACK: the stored session and its subscription are on the disk.
    snapshots.push(await cut(gw, disk, `${ROOT}data/${name}-cut0.img`, devices, keepers, true));
    for (const d of devices) track(running, d.run(gw.port, PER_DEVICE));
    const acked = () => devices.reduce((n, d) => n + d.acked.size, 0);
    for (let k = 0; k < CUTS; k++) {
      // Somewhere in the k-th part of the run, never at its very end.
      const at = Math.floor(DEVICES * PER_DEVICE * (k + 0.1 + 0.8 * Math.random()) / CUTS);
      await waitFor(() => acked() >= at, 30_000, `${at} PUBACKs before cut ${k + 1}`);
      const image = `${ROOT}data/${name}-cut${k + 1}.img`;
      snapshots.push(await cut(gw, disk, image, devices, keepers, k < CUTS - 1));
    }
  } finally {
    for (const k of keepers) k.stop();
    for (const d of devices) d.stop();
    try {
      gw.child.kill("SIGKILL"); // a failed cut may have left it stopped, deaf to SIGTERM
    } catch { /* killed by the last cut */ }
    await gw.child.status;
    await clientsEnded(running);
  }
  return snapshots;
}

/**
 * Runs `e2fsck -fy` on a copy: ext4 replays its journal and recounts the superblock's free
 * blocks and inodes (kept per group, the sums not journaled); any other repair is damage.
 * Returns what it did, in a few words.
 */
async function checkFilesystem(image: string, when: string): Promise<string> {
  const fsck = await run("e2fsck", ["-fy", image]);
  const repairs = fsck.out.split("\n").map((l) => l.trim())
    .filter((l) => / wrong |\?/.test(l) && l !== "Fix? yes");
  const benign = /^Free (blocks|inodes) count wrong \(\d+, counted=\d+\)\.$/;
  assert.ok(
    fsck.code <= 1 && repairs.every((l) => benign.test(l)),
    `${when}: e2fsck said (exit ${fsck.code}): ${fsck.out}`,
  );
  const replayed = fsck.out.includes("recovering journal") ? "journal replayed, " : "";
  return `e2fsck exit ${fsck.code}: ${replayed}${repairs.length} free counts recounted`;
}

Deno.test({
  name:
    `power loss: after a SUBACK and at ${CUTS} random cuts of a loop-mounted ext4 under QoS 1 load of 2 KiB messages, every PUBACKed message survives byte for byte and in order, nothing unsent appears, the stored sessions (3.1.1 and 5) come back with nothing owed lost, across several segment files${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    const name = `powerloss-${crypto.randomUUID()}`;
    try {
      let snapshots: Snapshot[];
      let segments = 0;
      {
        await using disk = await mountSmallDisk(`${ROOT}data/${name}`, 128, MOUNT_OPTIONS);
        snapshots = await runWithCuts(name, disk);
        for (const e of Deno.readDirSync(`${disk.dir}/gateway.db-log`)) {
          if (e.name.endsWith(".log")) segments++;
        }
      }
      assert.ok(segments >= 4, `${segments} segment files: the run should roll through several`);
      for (const [k, snap] of snapshots.entries()) {
        const when = `cut ${k}`;
        const fsck = await checkFilesystem(snap.image, when);
        const dir = `data/${name}-cut${k}`;
        await using copy = await mountImage(snap.image, `${ROOT}${dir}`, MOUNT_OPTIONS);
        const db = `${dir}/gateway.db`;
        const kept = checkStored(await readBack(`${ROOT}${db}`), snap, when);
        const sum = (ns: number[]) => ns.reduce((a, b) => a + b, 0);
        const files = Deno.readDirSync(`${copy.dir}/gateway.db-log`).toArray().length;
        const restarted = await restartOn(db, snap, kept, when);
        console.log(
          `power loss ${when} (${fsck}): ${sum(snap.acked.map((s) => s.size))} PUBACKed, ` +
            `${sum(kept)} stored of ${sum(snap.sent)} sent, ${files} segment files; ${restarted}`,
        );
      }
    } finally {
      for (let k = 0; k <= CUTS; k++) {
        await Deno.remove(`${ROOT}data/${name}-cut${k}.img`).catch(() => {});
      }
    }
  },
});
