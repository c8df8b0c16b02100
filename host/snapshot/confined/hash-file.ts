import { createHash } from 'node:crypto';
import { closeSync, readSync } from 'node:fs';
import type { ReadBudget } from './bounds';
import type { ConfinedTree } from './resolver';

const CHUNK = 1 << 20;
const buffer = Buffer.allocUnsafe(CHUNK);
const zeros = Buffer.alloc(CHUNK);
// Below this a file may hold its bytes inline with no block allocated (btrfs, ext4 inline data).
const SPARSE_MIN = 1 << 20;

/** Lets the event loop run (and a cancel land) between chunks. */
const breathe = () => new Promise<void>((r) => setImmediate(r));

/**
 * sha256 of the regular file `p` of the tree, read through a descriptor proved to be a regular
 * file of the sandbox (see `openFileAt`); `undefined` when it is gone or not a regular file.
 * Counted against `budget` before a byte is read (its size, holes included: past the sandbox's
 * disk limit or the host's byte bound it is refused by name). A file with no block allocated
 * (a hole, as `truncate` makes) is all zeros: its digest is computed without reading it. The
 * digest is the same sha256 as for the same bytes written out. Stops when the run is cancelled.
 */
export async function hashConfined(tree: ConfinedTree, p: string, budget: ReadBudget): Promise<{ hash: string; size: number; nlink: number } | undefined> {
  const f = tree.openFile(p);
  if (!f) return undefined;
  try {
    const size = Number(f.st.size);
    budget.file(size, p);
    const hash = createHash('sha256');
    if (size >= SPARSE_MIN && f.st.blocks === 0n) {
      for (let left = size, i = 1; left > 0; left -= CHUNK, i++) {
        hash.update(left >= CHUNK ? zeros : zeros.subarray(0, left));
        if (i % 64 === 0) await step(budget);
      }
      return { hash: hash.digest('hex'), size, nlink: Number(f.st.nlink) };
    }
    let read = 0;
    for (;;) {
      // Never past the size that was counted: a file that grows while read is a writer, which the check after the commit sees.
      const n = readSync(f.fd, buffer, 0, Math.min(CHUNK, size - read), null);
      if (n === 0) break;
      hash.update(buffer.subarray(0, n));
      read += n;
      if (read % (16 * CHUNK) === 0) await step(budget);
    }
    return { hash: hash.digest('hex'), size: read, nlink: Number(f.st.nlink) };
  } finally {
    closeSync(f.fd);
  }
}

async function step(budget: ReadBudget): Promise<void> {
  await breathe();
  budget.check();
}

/** The bytes of the regular file `p` (for a layer built here), bounded like {@link hashConfined}. */
export function readConfined(tree: ConfinedTree, p: string, budget: ReadBudget): { data: Buffer; hash: string; st: import('node:fs').BigIntStats } | undefined {
  const f = tree.openFile(p);
  if (!f) return undefined;
  try {
    const size = Number(f.st.size);
    budget.file(size, p);
    const data = Buffer.alloc(size);
    let read = 0;
    while (read < size) {
      const n = readSync(f.fd, data, read, size - read, null);
      if (n === 0) break;
      read += n;
    }
    const out = data.subarray(0, read);
    return { data: out, hash: createHash('sha256').update(out).digest('hex'), st: f.st };
  } finally {
    closeSync(f.fd);
  }
}
