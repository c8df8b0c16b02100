import { BerthError } from '../errors';
import type { WorkspaceManifest } from './manifest';

/** What a scan needs from a sandbox: run a command (as root, so nothing is unreadable) with stdin. */
export type ScanExec = (cmd: string[], opts: { stdin?: string; signal?: AbortSignal }) => Promise<{ exitCode: number; stdout: string; stderr: string; truncated: boolean }>;

// Batches keep the number of processes independent of the number of files. xargs exits 123 when
// stat skips a path that no longer exists; a missing path simply produces no line.
const SCRIPT = `
cd "$1" || exit 3
list() { if [ "$2" = all ]; then find . -mindepth 1 | tr '\\n' '\\0'; else tr '\\n' '\\0'; fi; }
paths=$(list "$@" | tr '\\0' '\\n')
printf '%s\\n' "$paths" | grep -v '^$' | tr '\\n' '\\0' | xargs -0 -r stat -c 'S|%F|%a|%n' -- 2>/dev/null
printf '%s\\n' "$paths" | grep -v '^$' | while IFS= read -r p; do [ -f "$p" ] && [ ! -L "$p" ] && printf '%s\\0' "$p"; done | xargs -0 -r sha256sum -- 2>/dev/null | sed 's/^/H|/'
printf '%s\\n' "$paths" | grep -v '^$' | while IFS= read -r p; do [ -L "$p" ] && printf 'L|%s|%s\\n' "$(readlink "$p")" "$p"; done
[ "$2" = all ] || printf '%s\\n' "$paths" | grep -v '^$' | while IFS= read -r p; do [ -d "$p" ] && [ ! -L "$p" ] && find "$p" -mindepth 1 -maxdepth 1 | sed 's/^/C|/'; done
exit 0
`;

/**
 * Scans `paths` (relative, `./`-prefixed) of the workspace, or all of it, inside the container.
 * Returns the manifest entries of the paths that exist. Paths holding a newline cannot be listed
 * line by line and are refused rather than silently skipped.
 */
export async function scanWorkspace(exec: ScanExec, workspace: string, paths: string[] | 'all', signal?: AbortSignal): Promise<ScanResult> {
  if (paths !== 'all' && paths.length === 0) return { entries: {}, children: new Map() };
  const odd = paths === 'all' ? undefined : paths.find((p) => p.includes('\n'));
  if (odd !== undefined) throw new BerthError('workspace_unscannable', `workspace path ${JSON.stringify(odd)} contains a newline`);
  const r = await exec(['sh', '-c', SCRIPT, 'scan', workspace, paths === 'all' ? 'all' : 'list'], {
    ...(paths === 'all' ? {} : { stdin: `${paths.join('\n')}\n` }),
    signal,
  });
  if (r.exitCode !== 0 || r.truncated) {
    throw new BerthError('workspace_scan_failed', `scanning ${workspace} failed (exit ${r.exitCode}${r.truncated ? ', output truncated' : ''}): ${r.stderr.slice(0, 500)}`, {
      retryable: true,
    });
  }
  return parseScan(r.stdout);
}

/**
 * Entries found, and for each rescanned directory the paths of its current children: a directory
 * deleted and made again hides its old children from `docker diff`, so they are found missing here.
 */
export interface ScanResult {
  entries: WorkspaceManifest;
  children: Map<string, Set<string>>;
}

/** Parses the sections the scan script prints. Exported for unit tests. */
export function parseScan(out: string): ScanResult {
  const children = new Map<string, Set<string>>();
  const stat = new Map<string, { type: string; mode: string }>();
  const hashes = new Map<string, string>();
  const links = new Map<string, string>();
  for (const line of out.split('\n')) {
    if (line.startsWith('S|')) {
      const [, type, mode] = line.split('|', 3);
      const path = line.slice(2 + type!.length + 1 + mode!.length + 1);
      stat.set(path, { type: type!, mode: mode! });
    } else if (line.startsWith('H|')) {
      hashes.set(line.slice(2 + 64 + 2), line.slice(2, 2 + 64));
    } else if (line.startsWith('L|')) {
      // A link target may hold `|`; the path starts with "./" after the last "|./".
      const at = line.lastIndexOf('|./');
      links.set(line.slice(at + 1), line.slice(2, at));
    } else if (line.startsWith('C|')) {
      const child = line.slice(2);
      const parent = child.slice(0, child.lastIndexOf('/'));
      children.set(parent, (children.get(parent) ?? new Set()).add(child));
    }
  }
  const manifest: WorkspaceManifest = {};
  for (const [path, { type, mode }] of stat) {
    if (type === 'symbolic link') manifest[path] = `l:${links.get(path) ?? ''}`;
    else if (type === 'directory') manifest[path] = `d:${mode}`;
    else if (type.startsWith('regular')) manifest[path] = `f:${mode}:${hashes.get(path) ?? 'unreadable'}`;
    else manifest[path] = `o:${mode}`;
  }
  for (const [path, { type }] of stat) if (type === 'directory' && !children.has(path)) children.set(path, new Set());
  return { entries: manifest, children };
}
