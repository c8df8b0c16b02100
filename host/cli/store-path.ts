import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BerthError } from '../errors';
import { isPostgresUrl } from '../store/open-store';

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
