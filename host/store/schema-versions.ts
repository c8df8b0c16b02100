import { BerthError } from '../errors';
import { POSTGRES_SQL } from './postgres/migrations';
import { MIGRATIONS } from './sqlite/migrations';

/** One schema version: the same change written for each store. */
export interface SchemaVersion {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

/**
 * The one list of schema versions both stores apply, in order. The SQLite text lives in
 * `sqlite/migrations.ts` and the PostgreSQL text in `postgres/migrations.ts`, keyed by the same
 * version; a version written for one store only is refused here, so a store can never be at a
 * version the other does not know.
 */
export const SCHEMA_VERSIONS: ReadonlyArray<SchemaVersion> = MIGRATIONS.map((m) => {
  const postgres = POSTGRES_SQL[m.version];
  if (postgres === undefined) {
    throw new BerthError('schema_incomplete', `schema version ${m.version} (${m.name}) has no PostgreSQL text in host/store/postgres/migrations.ts`);
  }
  return { version: m.version, name: m.name, sqlite: m.sql, postgres };
});

/** The newest schema version this build knows. */
export const NEWEST_SCHEMA_VERSION = SCHEMA_VERSIONS[SCHEMA_VERSIONS.length - 1]?.version ?? 0;

/** The refusal both stores give for a database written by a newer Berth. */
export function storeTooNew(location: string, found: number): BerthError {
  return new BerthError(
    'store_too_new',
    `store ${location} has schema version ${found}, newer than this Berth (${NEWEST_SCHEMA_VERSION}); upgrade Berth`,
    { details: { location, storeVersion: found, berthVersion: NEWEST_SCHEMA_VERSION } },
  );
}
