import { randomBytes } from 'node:crypto';
import { CONTROL_DIR, type ExecOptions, type ExecResult } from '../sandbox';
import type { ResolvedSecret } from './resolve';

/** The part of a lease that exposing secrets needs. */
export interface SecretExecTarget {
  /** `uid:gid` the command runs as: its group may read the files. */
  readonly owner: string;
  exec(cmd: string[], opts?: ExecOptions): Promise<ExecResult>;
}

/**
 * The parent of every per-exec secret directory: the sandbox's control tmpfs (host/sandbox
 * container-options.ts), root's, mode 0711. A command can open a path there that it knows, but
 * cannot list it or create anything in it, and it is in no layer, commit or snapshot image.
 */
export const SECRET_DIR = CONTROL_DIR;

/**
 * Run as root with the command's group: a fresh directory (0710: the group may enter, not list)
 * and one file in it (0440). Root has no capabilities in the sandbox, so it does this as the owner
 * of the directory, not by override; no process of the command's uid can change or remove them.
 * A container that predates the control mount gets the parent made here (only root can, in /dev).
 */
const WRITE_SCRIPT = `[ -d ${SECRET_DIR} ] || mkdir -m 0711 ${SECRET_DIR} || exit 3
[ -d "$1" ] || mkdir -m 0710 "$1" || exit 3
umask 0337 && cat > "$1/$2"`;

/**
 * Runs `fn` with the secrets exposed for one exec: `env` ones in the returned environment (given
 * to that exec only, so `docker inspect` never shows them), `file` ones as files in a directory
 * made for this exec under {@link SECRET_DIR}, written just before and removed just after,
 * whatever `fn` does. Its name is 128 random bits that no other process can list, so only the
 * command told the path (`$NAME_FILE`) finds it; every process an earlier command left is gone
 * before this one starts (host/sandbox), and what `keepProcesses` kept could read the path from
 * the command's environment while it runs (same uid), as it could read an `env` secret.
 * Values travel as exec stdin, never in a command line.
 */
export async function withSecrets<T>(target: SecretExecTarget, secrets: readonly ResolvedSecret[], fn: (env: Record<string, string>) => Promise<T>): Promise<T> {
  const env: Record<string, string> = {};
  const files = secrets.filter((s) => s.expose === 'file');
  for (const s of secrets) if (s.expose === 'env') env[s.name] = s.value;
  if (files.length === 0) return fn(env);
  const dir = `${SECRET_DIR}/${randomBytes(16).toString('hex')}`;
  const user = `0:${target.owner.split(':')[1] ?? '0'}`;
  try {
    for (const s of files) {
      const r = await target.exec(['sh', '-c', WRITE_SCRIPT, 'sh', dir, s.name], { stdin: s.value, timeoutMs: 30_000, user });
      if (r.exitCode !== 0) throw new Error(`could not write secret file for ${s.name} (exit ${r.exitCode})`);
      env[`${s.name}_FILE`] = `${dir}/${s.name}`;
    }
    return await fn(env);
  } finally {
    await target.exec(['rm', '-rf', dir], { timeoutMs: 30_000, user }).catch(() => {});
  }
}

/**
 * Removes every secret directory in the sandbox: those a host that died mid-exec left. Only while
 * no command of this lease runs with secrets (attaching a lease does it already).
 */
export async function removeStaleSecretFiles(target: SecretExecTarget): Promise<boolean> {
  const r = await target.exec(['sh', '-c', `for d in ${SECRET_DIR}/*/; do [ -d "$d" ] && rm -rf "$d"; done; [ ! -e /dev/shm/berth-secrets ] || exit 1`, 'sh'], { timeoutMs: 30_000, user: '0:0' });
  if (r.exitCode === 0) return true;
  // Older versions kept secret files on /dev/shm, owned by the command user.
  return (await target.exec(['rm', '-rf', '/dev/shm/berth-secrets'], { timeoutMs: 30_000 })).exitCode === 0;
}
