import { BerthError, isBerthError, type ErrorIds } from '../errors';
import type { ExecOptions, ExecResult } from '../sandbox';
import { resolveSecrets, hostSecretSource, type SecretDecl, type SecretSource } from './resolve';
import { encodedCores, scrub, type ScrubSecret } from './scrub';

/** What the check needs from a lease: its `docker diff` and a command run as root. */
export interface SnapshotCheckLease {
  changes(): Promise<Array<{ path: string; kind: 'modified' | 'added' | 'deleted' }>>;
  exec(cmd: string[], opts?: ExecOptions): Promise<ExecResult>;
}

/** Where a secret was found: a file's bytes, the name of a file or directory, or a symlink's target. */
export type SecretPlace = 'content' | 'file name' | 'directory name' | 'symlink target';

/** One changed path that holds a secret (`secret` names it, `in` says where) or could not be read (`secret: null`). */
export interface SecretHit {
  path: string;
  secret: string | null;
  in?: SecretPlace;
}

/** Image label a snapshot gets when it holds secret material it was allowed to keep: never push such an image. */
export const SECRET_MATERIAL_LABEL = 'berth.secret-material';

// A line of a multi-line value shorter than this (a PEM armour line is 27+) would hit in ordinary files.
const MIN_LINE = 16;

/**
 * The byte patterns a file holding `value` contains: the value itself (each long line of a
 * multi-line value, since grep matches line by line), its base64 core at the three byte offsets
 * in both alphabets, and its hex in both cases. The cores are substrings of every whole encoding.
 */
export function fileForms(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const forms = new Set<string>();
  if (value.includes('\n')) for (const line of value.split('\n')) if (line.length >= MIN_LINE) forms.add(line);
  if (!value.includes('\n')) forms.add(value);
  for (const f of encodedCores(bytes)) forms.add(f);
  return [...forms].filter((f) => f.length > 0);
}

// stdin: the number of secrets, then per secret its number of patterns and the patterns, one a
// line; the rest is the NUL-separated list of changed paths. Pattern files live on /dev/shm (the
// tmpfs, never in a layer), mode 0600. Only regular files are read (a FIFO would block grep);
// a path that exists per `docker diff` but cannot be seen or read is reported as `U|path`. Each
// path's type (one letter, in order) is printed first as `Y|...`, for the host to match names;
// every symlink's target is matched here (`N|T|path`).
const SCRIPT = `
umask 077
d=$(mktemp -d /dev/shm/berth-scan.XXXXXX) || exit 3
trap 'rm -rf "$d"' EXIT
IFS= read -r k
i=0
while [ "$i" -lt "$k" ]; do
  IFS= read -r n; j=0; : > "$d/p$i"
  while [ "$j" -lt "$n" ]; do IFS= read -r l; printf '%s\\n' "$l" >> "$d/p$i"; j=$((j+1)); done
  i=$((i+1))
done
: > "$d/unread"; : > "$d/types"; : > "$d/links"
cat | xargs -0 -r sh -c '
d=$1; shift
for p; do
  if [ -L "$p" ]; then printf l >> "$d/types"; printf "%s\\0" "$p" >> "$d/links"
  elif [ -d "$p" ]; then printf d >> "$d/types"
  elif [ -f "$p" ]; then printf f >> "$d/types"; if [ -r "$p" ]; then printf "%s\\0" "$p"; else printf "U|%s\\n" "$p" >> "$d/unread"; fi
  elif [ ! -e "$p" ]; then printf u >> "$d/types"; printf "U|%s\\n" "$p" >> "$d/unread"
  else printf o >> "$d/types"
  fi
done; exit 0' sh "$d" > "$d/files"
printf 'Y|'; cat "$d/types"; printf '\\n'
cat "$d/unread"
i=0
while [ "$i" -lt "$k" ]; do
  xargs -0 -r grep -l -F -f "$d/p$i" -- < "$d/files" 2>/dev/null | sed "s/^/$i|/"
  xargs -0 -r sh -c 'f=$1; i=$2; shift 2; for p; do t=$(readlink "$p") || continue; if printf "%s\\n" "$t" | grep -q -F -f "$f"; then printf "%s|T|%s\\n" "$i" "$p"; fi; done; exit 0' sh "$d/p$i" "$i" < "$d/links"
  i=$((i+1))
done
exit 0
`;

const NAME_PLACE: Record<string, SecretPlace> = { d: 'directory name', f: 'file name', l: 'file name', o: 'file name', u: 'file name' };

/**
 * Every changed file of the container (all `docker diff` paths, not only the workspace) that
 * holds one of `secrets` in a form {@link fileForms} knows, and every changed path the check could
 * not read (`secret: null`). Reads only what changed, so the cost follows the change. Runs as the
 * sandbox's command user: the container has no capabilities, so root could read no more, and the
 * engine refuses a privileged exec under no-new-privileges. A file that user cannot read (it made
 * it mode 000 or hid it in a closed directory) fails closed. Paths holding a newline are checked
 * (the list is NUL-separated) but named only up to the newline.
 */
export async function findSecretsInChanges(lease: SnapshotCheckLease, secrets: readonly ScrubSecret[], signal?: AbortSignal): Promise<SecretHit[]> {
  if (secrets.length === 0) return [];
  const paths = (await lease.changes()).filter((c) => c.kind !== 'deleted').map((c) => c.path);
  if (paths.length === 0) return [];
  const patterns = secrets.map((s) => fileForms(s.value));
  const stdin = [String(secrets.length), ...patterns.flatMap((p) => [String(p.length), ...p])].join('\n') + '\n' + paths.join('\0') + '\0';
  const r = await lease.exec(['sh', '-c', SCRIPT, 'secret-scan'], { stdin, timeoutMs: 600_000, outputCapBytes: 16 << 20, signal });
  if (r.exitCode !== 0 || r.truncated) {
    throw new BerthError('snapshot_scan_failed', `checking the changed files for secrets failed (exit ${r.exitCode}${r.truncated ? ', output truncated' : ''}): ${scrub(r.stderr.slice(0, 300), secrets)}`, { retryable: true });
  }
  const hits: SecretHit[] = [];
  for (const line of r.stdout.split('\n')) {
    if (line.startsWith('Y|')) {
      // A secret in a name is in every listing, tar header and manifest that names the path: matched here on the host.
      const types = line.slice(2);
      paths.forEach((p, i) => {
        const name = p.slice(p.lastIndexOf('/') + 1);
        patterns.forEach((forms, k) => {
          if (forms.some((f) => name.includes(f))) hits.push({ secret: secrets[k]!.name, path: scrub(p, secrets), in: NAME_PLACE[types[i] ?? 'f'] ?? 'file name' });
        });
      });
      continue;
    }
    const m = /^(\d+|U)\|(T\|)?(.*)$/.exec(line);
    if (m?.[1] === 'U') hits.push({ secret: null, path: scrub(m[2] ? m[2] + m[3]! : m[3]!, secrets) });
    else if (m && secrets[Number(m[1])]) hits.push({ secret: secrets[Number(m[1])]!.name, path: scrub(m[3]!, secrets), in: m[2] ? 'symlink target' : 'content' });
  }
  return hits;
}

/**
 * The run's secret values for the check: every secret the manifest declares, read on the host now.
 * One that cannot be read now is skipped: it was not given to any command of this process either.
 */
export async function declaredValues(decls: readonly SecretDecl[], ids: ErrorIds, source: SecretSource): Promise<ScrubSecret[]> {
  const out: ScrubSecret[] = [];
  for (const d of decls) {
    try {
      out.push(...(await resolveSecrets(decls, [d.name], ids, source)));
    } catch (err) {
      if (!isBerthError(err, 'secret_unavailable')) throw err;
    }
  }
  return out;
}

/**
 * The check before a snapshot is committed: a changed file holding a secret refuses the snapshot
 * (`snapshot_holds_secret`, naming the files and secrets) unless every secret found says
 * `allowInWorkspace: true`; then the returned labels mark the image as holding secret material.
 */
export async function checkSnapshotSecrets(
  lease: SnapshotCheckLease,
  decls: readonly SecretDecl[],
  o: { ids?: ErrorIds; signal?: AbortSignal; source?: SecretSource } = {},
): Promise<Record<string, string>> {
  const ids = o.ids ?? {};
  const hits = await findSecretsInChanges(lease, await declaredValues(decls, ids, o.source ?? hostSecretSource), o.signal);
  if (hits.length === 0) return {};
  // A name or link target goes into the manifest the store keeps: allowInWorkspace covers file bytes only.
  const refused = hits.filter((h) => h.secret === null || (h.in !== undefined && h.in !== 'content') || !decls.find((d) => d.name === h.secret)?.allowInWorkspace);
  if (refused.length > 0) {
    const list = refused.map((h) => `${h.path} (${h.secret ? `${h.secret}, in its ${h.in ?? 'content'}` : 'unreadable, so not checked'})`).join(', ');
    throw new BerthError('snapshot_holds_secret', `snapshot refused: changed file${refused.length === 1 ? '' : 's'} ${list} hold${refused.length === 1 ? 's' : ''} a secret value; remove it, keep it under /dev/shm, or set allowInWorkspace on the secret`, {
      ids,
      details: { files: refused.map((h) => h.path), places: refused.map((h) => h.in ?? null), secrets: [...new Set(refused.flatMap((h) => (h.secret ? [h.secret] : [])))] },
    });
  }
  return { [SECRET_MATERIAL_LABEL]: [...new Set(hits.map((h) => h.secret))].sort().join(',') };
}
