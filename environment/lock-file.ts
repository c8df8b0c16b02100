import { readFile } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../host/errors';
import { DIGEST } from './field-checks';
import type { Environment } from './schema';

/**
 * The pin of a manifest's image, kept beside it as package managers keep a lock file: `env.yaml`
 * gets `env.lock.json`. The manifest says which image (`image.ref`); the lock says which exact
 * build this machine uses (the image id, local since images are built locally), so locking never
 * rewrites the manifest. A digest written in the manifest itself still wins.
 */
export const LockFileSchema = z.strictObject({
  image: z.strictObject({ ref: z.string().min(1), digest: z.string().regex(DIGEST, 'sha256: followed by 64 lowercase hex digits') }),
});
export type LockFile = z.infer<typeof LockFileSchema>;

/** `dir/env.yaml` -> `dir/env.lock.json`. */
export function lockFileFor(manifest: string): string {
  return join(dirname(manifest), `${basename(manifest, extname(manifest))}.lock.json`);
}

/** The lock file's text for `ref` pinned to `digest`. */
export function lockFileText(ref: string, digest: string): string {
  return `${JSON.stringify(LockFileSchema.parse({ image: { ref, digest } }), null, 2)}\n`;
}

/**
 * The manifest with the pin of its lock file applied, when the manifest pins nothing itself and
 * the lock names the same `image.ref` (a lock left from another ref pins nothing: lock again).
 */
export async function applyLockFile(manifest: string, env: Environment): Promise<Environment> {
  if (env.image.digest !== undefined) return env;
  const file = lockFileFor(manifest);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return env;
    throw err;
  }
  let lock: LockFile;
  try {
    lock = LockFileSchema.parse(JSON.parse(text));
  } catch (cause) {
    throw new BerthError('lock_invalid', `lock file ${file} is not a Berth lock file (${(cause as Error).message.split('\n')[0]}); remove it and run berth env lock ${manifest}`, { details: { file }, cause });
  }
  if (lock.image.ref !== env.image.ref) return env;
  return { ...env, image: { ...env.image, digest: lock.image.digest } };
}
