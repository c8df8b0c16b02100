import { readFile } from 'node:fs/promises';
import type { Environment } from '../../environment';
import { BerthError, type ErrorIds } from '../errors';

/** A secret's manifest entry. */
export type SecretDecl = Environment['secrets'][number];

/** A secret's value, read on the host for one use and never kept beyond it. */
export interface ResolvedSecret {
  name: string;
  value: string;
  expose: 'env' | 'file';
}

/** Where secret values come from; tests pass their own, the host reads its environment and files. */
export interface SecretSource {
  env(name: string): string | undefined;
  file(path: string): Promise<string>;
}

/** The host process's environment and file system. */
export const hostSecretSource: SecretSource = {
  env: (name) => process.env[name],
  file: (path) => readFile(path, 'utf8'),
};

/**
 * Reads the named secrets' values from the host. A missing variable or unreadable file is a
 * `secret_unavailable` error naming the secret and its source (never the value). A file's single
 * trailing newline is dropped, since editors add one that nobody means as part of a token.
 */
export async function resolveSecrets(decls: readonly SecretDecl[], names: readonly string[], ids: ErrorIds = {}, source: SecretSource = hostSecretSource): Promise<ResolvedSecret[]> {
  const out: ResolvedSecret[] = [];
  for (const name of names) {
    const decl = decls.find((d) => d.name === name);
    if (!decl) throw new BerthError('secret_undeclared', `secret ${name} is not declared in the environment's secrets`, { ids, details: { secret: name } });
    let value: string | undefined;
    if ('env' in decl.from) {
      value = source.env(decl.from.env);
      if (value === undefined || value === '') {
        throw new BerthError('secret_unavailable', `secret ${name}: host environment variable ${decl.from.env} is not set`, { ids, details: { secret: name, env: decl.from.env } });
      }
    } else {
      const path = decl.from.file;
      try {
        value = (await source.file(path)).replace(/\r?\n$/, '');
      } catch (err) {
        throw new BerthError('secret_unavailable', `secret ${name}: cannot read host file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
          ids,
          details: { secret: name, file: path },
        });
      }
      if (value === '') throw new BerthError('secret_unavailable', `secret ${name}: host file ${path} is empty`, { ids, details: { secret: name, file: path } });
    }
    if (value.includes('\0')) throw new BerthError('secret_unavailable', `secret ${name}: the value contains a NUL byte`, { ids, details: { secret: name } });
    out.push({ name, value, expose: decl.expose });
  }
  return out;
}

/**
 * Refuses a consumer (plan step or tool) that names a secret the manifest does not declare or does
 * not give to it. Checked when a plan is loaded, so a bad plan fails before any sandbox exists.
 */
export function checkSecretGrants(decls: readonly SecretDecl[], consumers: ReadonlyArray<{ kind: 'step' | 'tool'; name: string; secrets: readonly string[] }>, file: string): void {
  for (const c of consumers) {
    for (const name of c.secrets) {
      const decl = decls.find((d) => d.name === name);
      if (!decl) {
        throw new BerthError('secret_undeclared', `${file}: ${c.kind} ${c.name} uses secret ${name}, which the environment does not declare`, {
          details: { file, [c.kind]: c.name, secret: name },
        });
      }
      if (!decl.to.includes(c.name)) {
        throw new BerthError('secret_not_allowed', `${file}: ${c.kind} ${c.name} uses secret ${name}, but the environment gives it only to ${decl.to.join(', ') || 'nobody'}`, {
          details: { file, [c.kind]: c.name, secret: name, to: decl.to },
        });
      }
    }
  }
}
