import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BerthError } from '../errors';
import { isPostgresUrl } from '../store';
import { assemble, defaultLogger, type HostParts } from '../api/assemble';
import type { Extension } from '../agent/custom-tasks';

/** What every command may use: the host's parts (see host/api/assemble.ts) and how to print. */
export interface CliContext extends HostParts {
  json: boolean;
  /** Application task kinds loaded with `--extension` / `BERTH_EXTENSIONS` (host/cli/extensions.ts). */
  extensions: Extension[];
  close(): Promise<void>;
}

export { artifactDir, artifactStore, dockerClient } from '../api/assemble';

/**
 * `--store`, else `BERTH_STORE`, else `.berth/berth.db` under the current directory. A
 * `postgres://` URL is kept as given (a fleet's shared store); anything else is a SQLite file path.
 */
export function storePath(flag: string | undefined): string {
  const given = flag ?? process.env.BERTH_STORE;
  if (given && isPostgresUrl(given)) return given;
  return resolve(given ?? join('.berth', 'berth.db'));
}

/**
 * Only commands that start work create a store; the others, given a path with no store (a typo,
 * another directory), say so instead of creating an empty one and reporting "run not found".
 */
export function requireStore(path: string): void {
  if (existsSync(path)) return;
  const fallback = storePath(undefined);
  const source = process.env.BERTH_STORE ? '$BERTH_STORE' : 'the default, under the current directory';
  throw new BerthError(
    'store_not_found',
    `no store at ${path}${path === fallback ? ` (${source})` : `; without --store it would be ${fallback} (${source})`}. ` +
      'Pass --store PATH, or start work with berth run or berth agent, which create it.',
    { details: { path, default: fallback } },
  );
}

/** The host's parts, built once by the API's {@link assemble} (the CLI is one adapter over it). */
export function buildContext(opts: { store?: string; json: boolean; debug?: boolean; create: boolean; extensions?: Extension[] }): CliContext {
  const path = storePath(opts.store);
  // A database that is not there is reported by the open itself (store_not_found, naming the URL).
  if (!opts.create && !isPostgresUrl(path)) requireStore(path);
  const parts = assemble({ store: path, logger: defaultLogger({ debug: opts.debug }) });
  return {
    ...parts,
    json: opts.json,
    extensions: opts.extensions ?? [],
    async close() {
      await parts.store.close();
    },
  };
}
