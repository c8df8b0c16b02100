import { randomUUID } from 'node:crypto';
import { BerthError } from '../errors';
import type { WorkspaceManifest } from './manifest';

/**
 * What a scan needs from a sandbox: run a command with stdin, as the workspace owner unless
 * `user` says otherwise. (Root in a sandbox has no capabilities, so it cannot read the owner's
 * private files either: what neither can read is read through the engine instead.)
 */
export type ScanExec = (cmd: string[], opts: { stdin?: string; signal?: AbortSignal; user?: string }) => Promise<{ exitCode: number; stdout: string; stderr: string; truncated: boolean }>;

/** One path's stat fields, as the scan compares them between two listings. */
export interface StatEntry {
  /** `type|mode|size|mtime|ctime|inode`: any change to the file's bytes changes size, mtime or ctime (ctime cannot be set from user space). */
  key: string;
  regular: boolean;
}

/** A listing of the whole workspace: stat fields of every path, and the manifest they give. */
export interface Listing {
  /** The container's clock (seconds, with nanoseconds where `date` has them) when the listing started. */
  now: number;
  /** The workspace directory with symlinks resolved (what the engine must read). */
  root: string;
  stats: Map<string, StatEntry>;
  manifest: WorkspaceManifest;
  /** Regular files whose content was hashed by this listing (the rest came from the previous one). */
  hashed: number;
  /**
   * False when some path could not be listed or some file not read: the manifest then holds values
   * that never verify, and the caller reads the workspace through the engine instead.
   */
  complete: boolean;
}

// One exec for the whole workspace: stat of every path (the process count does not grow
// with the file count), then sha256 of the regular files the previous listing does not vouch for
// (stdin: `key TAB path` of the previous listing) or that changed at or after the previous listing
// started (`$3`, the container's clock then, less a margin of one coarse clock tick, or a whole
// second where `stat` has only seconds): a rewrite in the same tick as the previous hash keeps
// size and times, git's "racy" entries. Then symlink targets.
// Temporary lists live in /dev/shm, a tmpfs that never reaches the writable layer or a commit.
// `$2` = `mark`: first touch the pending marker that the next snapshot's outside check compares
// against; `promote`: make the pending marker the marker; `nohash`: stat only.
const SCRIPT = `
cd "$1" || exit 3
t=/dev/shm/.berth-scan.$$
m=/dev/shm/.berth-snapmark
[ "$2" = mark ] && : > $m.pending
[ "$2" = promote ] && [ -f $m.pending ] && mv -f $m.pending $m
now=$(date +%s.%N)
case $now in *N) now=\${now%%.*};; esac
echo "T|$now"
find . -mindepth 1 -print0 2>$t.e | xargs -0 -r stat -c '%F|%a|%s|%.9Y|%.9Z|%i|%n' -- > $t.s 2>>$t.e
: > $t.h
awk -v since="$3" -v list="$t.h" -v mode="$2" '
  FNR == NR { i = index($0, "\\t"); if (i) prev[substr($0, i + 1)] = substr($0, 1, i - 1); next }
  {
    print "S|" $0
    if (mode == "nohash" || $0 !~ /^regular/) next
    rest = $0; key = "";
    for (k = 1; k <= 6; k++) { j = index(rest, "|"); f[k] = substr(rest, 1, j - 1); rest = substr(rest, j + 1); key = key (k > 1 ? "|" : "") f[k] }
    m = index(f[4], ".") ? 0.05 : 1
    if (!(rest in prev) || prev[rest] != key || since == "" || f[4] + 0 >= since - m || f[5] + 0 >= since - m) print rest > list
  }' - $t.s
[ -s $t.h ] && tr '\\n' '\\0' < $t.h | xargs -0 -r sha256sum -- 2>/dev/null | sed 's/^/H|/'
grep -q '^symbolic link|' $t.s && find . -mindepth 1 -type l | while IFS= read -r p; do printf 'L|%s|%s\\n' "$(readlink "$p")" "$p"; done
[ -s $t.e ] && echo "E|unlisted"
echo "R|$(pwd -P)"
rm -f $t.s $t.h $t.e
exit 0
`;

/**
 * Lists the workspace inside the container and returns its manifest. Regular files whose
 * stat fields equal `prev`'s (and are not racy) take their hash from `prev.manifest`; the rest are
 * hashed. A file root still cannot read gets a value no other scan can give: it can never verify.
 */
export async function listWorkspace(
  exec: ScanExec,
  workspace: string,
  prev: { stats: Map<string, StatEntry>; manifest: WorkspaceManifest; now?: number } | null,
  o: { mode?: 'hash' | 'mark' | 'promote' | 'nohash'; signal?: AbortSignal } = {},
): Promise<Listing> {
  const stdin = prev ? [...prev.stats].filter(([, s]) => s.regular).map(([p, s]) => `${s.key}\t${p}`).join('\n') + '\n' : '\n';
  const r = await exec(['sh', '-c', SCRIPT, 'scan', workspace, o.mode ?? 'hash', prev?.now ? String(prev.now) : ''], { stdin, signal: o.signal });
  if (r.exitCode !== 0 || r.truncated) {
    throw new BerthError('workspace_scan_failed', `scanning ${workspace} failed (exit ${r.exitCode}${r.truncated ? ', output truncated' : ''}): ${r.stderr.slice(0, 500)}`, { retryable: true });
  }
  return parseListing(r.stdout, prev?.manifest ?? {});
}

/** Parses what the listing script prints. Exported for unit tests. */
export function parseListing(out: string, prevManifest: WorkspaceManifest): Listing {
  let now = 0;
  let root = '';
  let complete = true;
  const stats = new Map<string, StatEntry>();
  const types = new Map<string, { type: string; mode: string }>();
  const hashes = new Map<string, string>();
  const links = new Map<string, string>();
  for (const line of out.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('T|')) now = Number(line.slice(2));
    else if (line.startsWith('E|')) complete = false;
    else if (line.startsWith('R|')) root = line.slice(2);
    else if (line.startsWith('S|')) {
      const f = line.slice(2).split('|');
      if (f.length < 7) throw unscannable(line);
      const path = f.slice(6).join('|');
      stats.set(path, { key: f.slice(0, 6).join('|'), regular: f[0]!.startsWith('regular') });
      types.set(path, { type: f[0]!, mode: f[1]! });
    } else if (line.startsWith('H|')) hashes.set(line.slice(2 + 64 + 2), line.slice(2, 2 + 64));
    else if (line.startsWith('L|')) {
      // A link target may hold `|`; the path starts with "./" after the last "|./".
      const at = line.lastIndexOf('|./');
      links.set(line.slice(at + 1), line.slice(2, at));
    } else throw unscannable(line);
  }
  const manifest: WorkspaceManifest = {};
  for (const [path, { type, mode }] of types) {
    if (type === 'symbolic link') manifest[path] = `l:${links.get(path) ?? ''}`;
    else if (type === 'directory') manifest[path] = `d:${mode}`;
    else if (type.startsWith('regular')) {
      const hash = hashes.get(path);
      const before = prevManifest[path];
      if (hash) manifest[path] = `f:${mode}:${hash}`;
      else if (before?.startsWith(`f:${mode}:`) && !before.includes(':unreadable:')) manifest[path] = before;
      else {
        manifest[path] = `f:${mode}:unreadable:${randomUUID()}`;
        complete = false;
      }
    } else manifest[path] = `o:${mode}`;
  }
  return { now, root, stats, manifest, hashed: hashes.size, complete };
}

function unscannable(line: string) {
  return new BerthError('workspace_unscannable', `workspace scan printed an unexpected line (a path holding a newline?): ${JSON.stringify(line.slice(0, 200))}`);
}

// Paths changed outside the workspace since the marker (creation, rewrite or deletion changes a
// file's or its directory's mtime); the engine's own bind mounts and pseudo filesystems are skipped.
const OUTSIDE = `
m=/dev/shm/.berth-snapmark
[ -f $m ] || { echo nomarker; exit 0; }
e=/dev/shm/.berth-outside.$$
find / -xdev \\( -path "$1" -o -path "$2" -o -path /etc/hosts -o -path /etc/hostname -o -path /etc/resolv.conf -o -path /proc -o -path /sys -o -path /dev \\) -prune -o -newer $m -print 2>$e | head -1
# A directory it could not read may hide a change.
[ -s $e ] && echo unreadable
rm -f $e
exit 0
`;

/**
 * Whether anything outside the workspace changed since the last snapshot of this container
 * (its marker); true when that cannot be told. Runs as root (which, without capabilities, still
 * cannot enter the owner's private directories: those make it answer true). Only asked when the
 * workspace itself is unchanged.
 */
export async function changedOutside(exec: ScanExec, workspace: string, resolved: string, signal?: AbortSignal): Promise<boolean> {
  const r = await exec(['sh', '-c', OUTSIDE, 'outside', workspace, resolved || workspace], { signal, user: '0:0' });
  return r.exitCode !== 0 || r.stdout.trim() !== '';
}
