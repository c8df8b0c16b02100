import type { BigIntStats } from 'node:fs';
import { closeDir, lstatAt, openConfinedRoot, openDirAt, openFileAt, readdirAt, readlinkAt, type ConfinedDir } from './confined-dir';
import { nameBytes } from './names';

const parentOf = (p: string) => (p === '.' ? '' : p.slice(0, p.lastIndexOf('/')));
const baseOf = (p: string) => p.slice(p.lastIndexOf('/') + 1);

// Open directories kept for the next lookups: a walk in depth-first order finds each parent here.
// Far below the process's descriptor limit (the kernel's default hard limit is 4096 on some hosts).
const CACHED = 1024;

/**
 * Workspace-relative paths (`./a/b`, names kept as {@link nameBytes} strings) looked up in a
 * confined root, one component at a time from the nearest open ancestor. A lookup gives a
 * directory to use at once: a later one may close it.
 */
export class ConfinedTree {
  private readonly open = new Map<string, ConfinedDir>();

  private constructor(root: ConfinedDir) {
    this.open.set('.', root);
  }

  /** The tree of `hostDir` + `ws` (each workspace component opened as a directory, never followed); `undefined` when it is not one. */
  static at(hostDir: string, ws: string): ConfinedTree | undefined {
    const root = openConfinedRoot(hostDir, ws.split('/'));
    return root ? new ConfinedTree(root) : undefined;
  }

  /** The directory `p`, or `undefined` when some component of it is not a directory there now. */
  dir(p: string): ConfinedDir | undefined {
    const hit = this.open.get(p);
    if (hit) {
      this.open.delete(p);
      this.open.set(p, hit);
      return hit;
    }
    const missing: string[] = [];
    let at = p;
    while (!this.open.has(at)) {
      missing.push(at);
      at = parentOf(at);
      if (at === '') return undefined;
    }
    let dir = this.open.get(at)!;
    for (let i = missing.length - 1; i >= 0; i--) {
      const next = openDirAt(dir, nameBytes(baseOf(missing[i]!)));
      if (!next) return undefined;
      this.keep(missing[i]!, next);
      dir = next;
    }
    return dir;
  }

  private keep(p: string, d: ConfinedDir): void {
    this.open.set(p, d);
    if (this.open.size > CACHED) {
      for (const [k, v] of this.open) {
        if (k === '.' || k === p) continue;
        closeDir(v);
        this.open.delete(k);
        break;
      }
    }
  }

  /** Stat fields of `p` itself (a link is not followed); `undefined` when it is gone. */
  lstat(p: string): BigIntStats | undefined {
    if (p === '.') return lstatAt(this.open.get('.')!, Buffer.from('.'));
    const d = this.dir(parentOf(p));
    return d && lstatAt(d, nameBytes(baseOf(p)));
  }

  /** The names in directory `p` (as bytes, byte-sorted), `undefined` when it is not a directory now. */
  children(p: string): Buffer[] | undefined {
    const d = this.dir(p);
    return d && readdirAt(d);
  }

  readlink(p: string): Buffer | undefined {
    const d = this.dir(parentOf(p));
    return d && readlinkAt(d, nameBytes(baseOf(p)));
  }

  /** `p` opened for reading when it is a regular file of this tree (see `openFileAt`). */
  openFile(p: string): { fd: number; st: BigIntStats } | undefined {
    const d = this.dir(parentOf(p));
    return d && openFileAt(d, nameBytes(baseOf(p)));
  }

  close(): void {
    for (const d of this.open.values()) closeDir(d);
    this.open.clear();
  }
}
