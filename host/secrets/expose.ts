import { randomBytes } from 'node:crypto';
import type { ExecOptions, ExecResult } from '../sandbox';
import type { ResolvedSecret } from './resolve';

/** The part of a lease that exposing secrets needs. */
export interface SecretExecTarget {
  exec(cmd: string[], opts?: ExecOptions): Promise<ExecResult>;
}

/**
 * The engine mounts a fresh tmpfs at /dev/shm in every container (see container-options.ts), so a
 * file there never reaches the writable layer, a `docker commit` or a snapshot image.
 */
export const SECRET_DIR = '/dev/shm/berth-secrets';

const WRITE_SCRIPT = 'umask 077 && mkdir -p "$1" && cat > "$1/$2"';

/**
 * Runs `fn` with the secrets exposed for one exec: `env` ones in the returned environment (given
 * to that exec only, so `docker inspect` never shows them), `file` ones as files under a fresh
 * directory in /dev/shm, written just before and removed just after, whatever `fn` does. The file
 * path goes to the command as `$NAME_FILE`. Values travel as exec stdin, never in a command line.
 */
export async function withSecrets<T>(target: SecretExecTarget, secrets: readonly ResolvedSecret[], fn: (env: Record<string, string>) => Promise<T>): Promise<T> {
  const env: Record<string, string> = {};
  const files = secrets.filter((s) => s.expose === 'file');
  for (const s of secrets) if (s.expose === 'env') env[s.name] = s.value;
  if (files.length === 0) return fn(env);
  const dir = `${SECRET_DIR}/${randomBytes(8).toString('hex')}`;
  try {
    for (const s of files) {
      const r = await target.exec(['sh', '-c', WRITE_SCRIPT, 'sh', dir, s.name], { stdin: s.value, timeoutMs: 30_000 });
      if (r.exitCode !== 0) throw new Error(`could not write secret file for ${s.name} (exit ${r.exitCode})`);
      env[`${s.name}_FILE`] = `${dir}/${s.name}`;
    }
    return await fn(env);
  } finally {
    await target.exec(['rm', '-rf', dir], { timeoutMs: 30_000 }).catch(() => {});
  }
}
