/**
 * Files that must survive a power loss, not only a killed process: a rename or a new file is
 * durable only once the directory holding its name is synced, and a file replaced by rename
 * must be synced before the rename, or a power cut can leave the new name on an empty file.
 *
 * @module
 */

/** Makes a directory's entries (a created, renamed or deleted file's name) durable. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await Deno.open(dir, { read: true });
  try {
    await handle.sync();
  } finally {
    try {
      handle.close();
    } catch { /* already closed */ }
  }
}

/**
 * Replaces `path` with `text` so that a power cut leaves the old file or the new one, whole:
 * writes `<path>.tmp`, syncs it, renames it over `path`, syncs the directory.
 */
export async function replaceFileDurably(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    const bytes = new TextEncoder().encode(text);
    for (let done = 0; done < bytes.length;) done += await file.write(bytes.subarray(done));
    await file.syncData();
  } finally {
    file.close();
  }
  await Deno.rename(tmp, path);
  await syncDirectory(directoryOf(path));
}

/** The directory holding `path` ("." for a bare name), as node:path's dirname. */
export function directoryOf(path: string): string {
  const slash = path.replace(/\/+$/, "").lastIndexOf("/");
  if (slash < 0) return ".";
  return slash === 0 ? "/" : path.slice(0, slash);
}
