/**
 * A real small filesystem for the tests of a full disk: an ext4 image file, loop-mounted. Needs
 * root (CI runs as root and mounts one); elsewhere {@link SMALL_DISK_SKIP} says why the tests
 * are skipped, and they say so in their names and on stderr.
 *
 * @module
 */
import { statfsSync } from "node:fs";

/** A mounted small ext4 and a filler file to take its space. */
export interface SmallDisk {
  /** The mount point. */
  readonly dir: string;
  /** The image file: what the loop device has been given, nothing still in the page cache. */
  readonly image: string;
  /** The loop device's name (e.g. "loop3"), for its /sys/block/<name>/inflight. */
  device(): Promise<string>;
  /** Bytes free for an unprivileged writer (what the store measures). */
  free(): number;
  /** Takes space with a filler file (no data written: fallocate) so that `leave` bytes stay free. */
  fill(leave: number): Promise<void>;
  /** Deletes the filler files. */
  unfill(): Promise<void>;
  /** Unmounts and deletes the image. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Why the small-disk tests cannot run here, or "" when they can. */
export const SMALL_DISK_SKIP = await whyNot();

if (SMALL_DISK_SKIP !== "") {
  console.warn(
    `WARNING: ${SMALL_DISK_SKIP}; the full-disk tests on a loop-mounted ext4 are SKIPPED.`,
  );
}

/** The note a skipped test's name carries. */
export const SMALL_DISK_NOTE = SMALL_DISK_SKIP === "" ? "" : ` [SKIPPED: ${SMALL_DISK_SKIP}]`;

async function whyNot(): Promise<string> {
  if (Deno.build.os !== "linux") return "not Linux";
  if (Deno.uid() !== 0) return "not root (mounting a loop device needs it)";
  for (const tool of ["mkfs.ext4", "mount", "umount", "fallocate"]) {
    const found = await run("sh", ["-c", `command -v ${tool}`]).then((r) => r.success, () => false);
    if (!found) return `${tool} not installed`;
  }
  // A probe mount: a container may be root without the right to mount.
  const probe = await mountSmallDisk(await Deno.makeTempDir({ prefix: "small_disk_probe_" }), 8)
    .catch((e: Error) => e);
  if (probe instanceof Error) return `cannot mount a loop device (${probe.message})`;
  await probe[Symbol.asyncDispose]();
  return "";
}

/**
 * Makes a `mb` MiB ext4 image beside `dir` and mounts it on `dir` (created if missing), with
 * `options` added to the mount's (`-o loop,<options>`).
 */
export async function mountSmallDisk(dir: string, mb = 64, options = ""): Promise<SmallDisk> {
  await Deno.mkdir(dir, { recursive: true });
  const image = `${dir}.img`;
  await checked("truncate", ["-s", `${mb}M`, image]);
  try {
    await checked("mkfs.ext4", ["-q", "-F", image]);
  } catch (e) {
    await Deno.remove(image).catch(() => {});
    throw e;
  }
  return await mountImage(image, dir, options);
}

/**
 * Mounts an existing ext4 image (e.g. a copy of another's) on `dir` (created if missing); the
 * disposal unmounts it and deletes the image.
 */
export async function mountImage(image: string, dir: string, options = ""): Promise<SmallDisk> {
  await Deno.mkdir(dir, { recursive: true });
  let fillers = 0;
  try {
    await checked("mount", ["-o", options === "" ? "loop" : `loop,${options}`, image, dir]);
  } catch (e) {
    await Deno.remove(image).catch(() => {});
    throw e;
  }
  const free = () => {
    const s = statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  };
  return {
    dir,
    image,
    async device() {
      const r = await run("findmnt", ["-n", "-o", "SOURCE", "--target", dir]);
      return new TextDecoder().decode(r.stdout).trim().replace(/^\/dev\//, "");
    },
    free,
    async fill(leave: number) {
      const take = free() - leave;
      if (take > 0) await checked("fallocate", ["-l", String(take), `${dir}/filler-${++fillers}`]);
    },
    async unfill() {
      for (; fillers > 0; fillers--) await Deno.remove(`${dir}/filler-${fillers}`).catch(() => {});
    },
    async [Symbol.asyncDispose]() {
      // Lazy: a process killed a moment ago may still be closing its files.
      await checked("umount", ["-l", dir]).catch(() => {});
      await Deno.remove(image).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

async function run(cmd: string, args: string[]): Promise<Deno.CommandOutput> {
  return await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
}

async function checked(cmd: string, args: string[]): Promise<void> {
  const r = await run(cmd, args);
  if (!r.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr).trim()}`);
  }
}
