/**
 * A full disk, as an edge box has one: the gateway process (`deno run -P=gateway main.ts run`)
 * keeps its store on a loop-mounted 128 MiB ext4 under ./data (its permission set writes only
 * there), devices publish QoS 1 and keep retrying (reconnect, resend what was not PUBACKed,
 * in order), and a filler file takes the disk. While it is full the gateway writes almost
 * nothing (≤ 10 MB per 20 s, measured from /proc/<pid>/io over a shorter window with a
 * proportional bound), /ready and the log name the disk; deleting the filler lets publishes
 * through within a second, without a restart. Every PUBACKed message is in the log after SIGTERM
 * and after SIGKILL, and each device's messages are stored in the order it sent them. Started on
 * a disk below the store's reserve, the gateway starts, says why /ready is 503, serves
 * subscriptions, and takes publishes once space is freed.
 *
 * Needs root to mount (tests/helpers/small_disk.ts); skipped loudly elsewhere.
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  connectRaw,
  publishPacket,
  subscribePacket,
  waitFor,
} from "../helpers/gateway.ts";
import { type GatewayProcess, spawnGateway } from "../helpers/process.ts";
import { openStoreReadOnly } from "../helpers/store.ts";
import { mountSmallDisk, SMALL_DISK_NOTE, SMALL_DISK_SKIP } from "../helpers/small_disk.ts";
import { DISK_RESERVE_BYTES } from "../../src/log/embedded/_disk_room.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEVICES = 4;
const PAYLOAD_BYTES = 1024;
/** The measuring window, and its share of the bound of 10 MB per 20 s. */
const WINDOW_MS = 10_000;
const MAX_WRITTEN = 10_000_000 * WINDOW_MS / 20_000;

/**
 * A device as devices are: QoS 1, a window of publishes in flight; when the connection closes it
 * reconnects and first sends again, in order, what was not PUBACKed.
 */
class Device {
  readonly id: string;
  #seq = 0;
  /** Not yet PUBACKed, in send order: packet id → sequence number. */
  readonly unacked = new Map<number, number>();
  readonly acked = new Set<number>();
  #stopped = false;
  #conn: Deno.TcpConn | undefined;
  #running: Promise<void> = Promise.resolve();

  constructor(id: string) {
    this.id = id;
  }

  /** The map's rule keys partitions by the device (`sensor_$1`): its order is one partition's. */
  get #topic(): string {
    return `sensors/${this.id}/data`;
  }

  start(port: number): void {
    this.#stopped = false;
    this.#running = this.#loop(port);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    try {
      this.#conn?.close();
    } catch { /* closed */ }
    await this.#running;
  }

  async #loop(port: number): Promise<void> {
    while (!this.#stopped) {
      await this.#session(port).catch(() => {});
      // Real time: a device reconnects after a pause, as a real one would.
      if (!this.#stopped) await new Promise((r) => setTimeout(r, 50));
    }
  }

  #payload(seq: number): Uint8Array {
    const head = new TextEncoder().encode(`${this.id}:${seq}:`);
    const p = new Uint8Array(PAYLOAD_BYTES).fill(0x2e);
    p.set(head);
    return p;
  }

  /** One connection: resend, then keep 20 in flight, until it closes. */
  async #session(port: number): Promise<void> {
    const conn = this.#conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await conn.write(connectPacket(this.id));
      const send = async (pid: number, seq: number, dup: boolean) => {
        await conn.write(publishPacket(this.#topic, this.#payload(seq), 1, pid, dup));
      };
      const buf = new Uint8Array(65536);
      let pending = new Uint8Array(0);
      let connected = false;
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) return;
        const merged = new Uint8Array(pending.length + n);
        merged.set(pending);
        merged.set(buf.subarray(0, n), pending.length);
        let pos = 0;
        for (; merged.length - pos >= 4; pos += 4) {
          const type = merged[pos] >> 4;
          if (type === 2 && !connected) {
            connected = true;
            for (const [pid, seq] of this.unacked) await send(pid, seq, true);
          }
          if (type === 4) {
            const pid = (merged[pos + 2] << 8) | merged[pos + 3];
            const seq = this.unacked.get(pid);
            if (seq !== undefined) {
              this.acked.add(seq);
              this.unacked.delete(pid);
            }
          }
        }
        pending = merged.slice(pos);
        while (connected && !this.#stopped && this.unacked.size < 20) {
          const seq = this.#seq++;
          const pid = (seq % 65535) + 1;
          if (this.unacked.has(pid)) break;
          this.unacked.set(pid, seq);
          await send(pid, seq, false);
        }
      }
    } finally {
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }
}

/** Bytes the process caused to be written to storage (`write_bytes` of /proc/<pid>/io). */
function storageWrites(pid: number): number {
  const io = Deno.readTextFileSync(`/proc/${pid}/io`);
  return Number(/^write_bytes: (\d+)$/m.exec(io)![1]);
}

async function ready(gw: GatewayProcess): Promise<{ status: number; body: string }> {
  const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
  return { status: r.status, body: JSON.stringify(await r.json()) };
}

function ackedCount(devices: Device[]): number {
  return devices.reduce((n, d) => n + d.acked.size, 0);
}

/**
 * Reads the log back: every PUBACKed message is there, and each device's messages, at their
 * first copy, are in the order it sent them (a resend of a stored message is a duplicate).
 */
async function checkLog(db: string, devices: Device[], when: string): Promise<void> {
  const store = await openStoreReadOnly(db);
  try {
    const info = await store.getTopic("sensors", "sensor_data");
    assert.ok(info, "the target topic exists");
    const stored = new Map<string, number[]>(devices.map((d) => [d.id, []]));
    for (let p = 0; p < info.partitions; p++) {
      const address = { stream: "sensors", topic: "sensor_data", partition: p };
      for (let from = 0;;) {
        const msgs = await store.poll(address, from, 5000);
        if (msgs.length === 0) break;
        for (const m of msgs) {
          const [id, seq] = new TextDecoder().decode(m.payload.subarray(0, 40)).split(":");
          stored.get(id)?.push(Number(seq));
        }
        from = msgs[msgs.length - 1].offset + 1;
      }
    }
    for (const d of devices) {
      const seqs = stored.get(d.id)!;
      const found = new Set(seqs);
      const lost = [...d.acked].filter((s) => !found.has(s));
      assert.deepEqual(lost, [], `${when}: PUBACKed messages of ${d.id} missing from the log`);
      const seen = new Set<number>();
      let last = -1;
      for (const s of seqs) {
        if (seen.has(s)) continue; // a resend of a stored message whose PUBACK was lost
        seen.add(s);
        assert.ok(s > last, `${when}: ${d.id} stored ${s} after ${last}: out of send order`);
        last = s;
      }
    }
  } finally {
    await store.close();
  }
}

Deno.test({
  name:
    `full disk: retrying publishers cost (almost) no writes, /ready names the disk, freed space lets publishes through within a second, nothing PUBACKed lost after SIGTERM and SIGKILL, each device's order kept, a start below the reserve serves${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    const name = `fulldisk-${crypto.randomUUID()}`;
    await using disk = await mountSmallDisk(`${ROOT}data/${name}`, 128);
    const db = `data/${name}/gateway.db`;
    const env = { IGGY_MQTT_EMBEDDED_PATH: db };
    const devices = Array.from({ length: DEVICES }, (_, i) => new Device(`disk-device-${i}`));
    let gw = await spawnGateway(env);
    try {
      assert.equal((await ready(gw)).status, 200);
      // A fresh store has made no segment: the disk is measured before its first (node:fs,
      // which measures it, is loaded then), and /ready shows the free space from then on.
      assert.match(
        gw.output.join(""),
        /"backend_detail":"the free space of the disk holding .*? is measured before the store's next new segment"/,
      );
      for (const d of devices) d.start(gw.port);
      await waitFor(() => ackedCount(devices) >= 200, 20_000, "PUBACKs before the disk fills");
      assert.match(
        (await ready(gw)).body,
        /the disk holding .*? has \d+ bytes free \(reserve \d+\)/,
      );
      // Room above the reserve for less than a whole segment: smaller ones take it, then none.
      await disk.fill(DISK_RESERVE_BYTES + 2 * 1024 * 1024);
      await waitFor(async () => (await ready(gw)).status === 503, 30_000, "/ready to say full");
      const down = await ready(gw);
      assert.match(down.body, /The disk holding .*gateway\.db-log.* has \d+ bytes free/);
      assert.doesNotMatch(down.body, /max_store_bytes/);

      const before = storageWrites(gw.child.pid);
      await new Promise((r) => setTimeout(r, WINDOW_MS)); // the measuring window itself
      const written = storageWrites(gw.child.pid) - before;
      console.log(`full disk: the gateway wrote ${written} bytes in ${WINDOW_MS} ms while full`);
      assert.ok(written <= MAX_WRITTEN, `${written} bytes written in ${WINDOW_MS} ms while full`);
      // (A few small batches may still fit the tail of the last segment made: no more.)
      const refused = "Appends refused: the disk holding the store is full";
      const lines = gw.output.join("").split("\n").filter((l) => l.includes(refused));
      assert.ok(lines.length > 0 && lines.length < 100, `${lines.length} "${refused}" lines`);
      assert.match(lines[0], /The disk holding/);

      const ackedWhileFull = ackedCount(devices);
      await disk.unfill();
      const freed = Date.now();
      await waitFor(() => ackedCount(devices) >= ackedWhileFull + 100, 5000, "PUBACKs again");
      const resumedMs = Date.now() - freed;
      console.log(`full disk: publishes resumed ${resumedMs} ms after the filler was deleted`);
      assert.ok(resumedMs <= 1000, `publishes resumed ${resumedMs} ms after space was freed`);
      await waitFor(async () => (await ready(gw)).status === 200, 3000, "/ready 200 again");

      for (const d of devices) await d.stop();
      assert.equal((await gw.stop()).code, 0);
      await checkLog(`${ROOT}${db}`, devices, "after SIGTERM");

      // Again, ended by SIGKILL while the disk is full.
      gw = await spawnGateway(env);
      for (const d of devices) d.start(gw.port);
      const acked = ackedCount(devices);
      await waitFor(() => ackedCount(devices) >= acked + 200, 20_000, "PUBACKs after restart");
      await disk.fill(DISK_RESERVE_BYTES + 2 * 1024 * 1024);
      await waitFor(async () => (await ready(gw)).status === 503, 30_000, "/ready to say full");
      gw.child.kill("SIGKILL");
      await gw.child.status;
      for (const d of devices) await d.stop();
      await checkLog(`${ROOT}${db}`, devices, "after SIGKILL");

      // Started on a disk below the reserve: it starts and serves subscriptions; appends fill
      // what room its last segment has, and the first that needs a new one is refused, naming
      // the disk; freed space lets publishes through again.
      await disk.fill(DISK_RESERVE_BYTES / 2);
      gw = await spawnGateway(env);
      const sub = await connectRaw(gw.port, "disk-subscriber");
      await sub.send(subscribePacket(1, [["sensors/+/data", 1]]));
      assert.deepEqual([...(await sub.readPacket(5000))!], [0x90, 3, 0, 1, 1]);
      sub.close();
      for (const d of devices) d.start(gw.port);
      await waitFor(async () => (await ready(gw)).status === 503, 30_000, "/ready to say full");
      assert.match((await ready(gw)).body, /The disk holding .* has \d+ bytes free/);
      for (const d of devices) await d.stop();
      await disk.unfill();
      await waitFor(async () => (await ready(gw)).status === 200, 1500, "/ready 200 once freed");
      for (const d of devices) d.start(gw.port);
      const ackedAtStart = ackedCount(devices);
      await waitFor(() => ackedCount(devices) >= ackedAtStart + 100, 10_000, "PUBACKs once freed");
      for (const d of devices) await d.stop();
      assert.equal((await gw.stop()).code, 0);
      await checkLog(`${ROOT}${db}`, devices, "after a start below the reserve");
    } finally {
      for (const d of devices) await d.stop();
      await gw.stop();
    }
  },
});
