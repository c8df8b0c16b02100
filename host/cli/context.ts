import { isPostgresUrl } from '../store';
import { requireStore, storePath } from './store-path';
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
export { requireStore, storePath } from './store-path';

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
