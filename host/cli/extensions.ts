import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Extension } from '../agent/custom-tasks';
import { BerthError } from '../errors';
import { loadModule } from '../support/load-module';

/**
 * The application task kinds (and their effect verifiers) this CLI carries, from `--extension
 * MODULE` (repeatable) and `BERTH_EXTENSIONS` (comma-separated): each module's default export is an
 * `Extension` (built with `extension(...)`) or a function returning one. With them, `resume`,
 * `reconcile` (`--verify` through the registered verifiers), `cancel`, `serve` and `worker` can
 * carry on a run of those kinds instead of refusing it with `task_kind_unknown`.
 */
export async function loadExtensions(flags: readonly string[], env: string | undefined = process.env.BERTH_EXTENSIONS): Promise<Extension[]> {
  const modules = [...flags, ...(env ?? '').split(',').map((s) => s.trim()).filter(Boolean)];
  const out: Extension[] = [];
  for (const m of modules) {
    const path = isAbsolute(m) ? m : resolve(m);
    // A TypeScript module is read through tsx (a dependency), as `npm run berth` reads the CLI itself.
    if (/\.[cm]?ts$/.test(path)) (await loadModule<typeof import('tsx/esm/api')>('tsx/esm/api')).register();
    let mod: Record<string, unknown>;
    try {
      mod = await loadModule(pathToFileURL(path).href);
    } catch (err) {
      throw new BerthError('extension_unloadable', `extension module ${m} could not be loaded: ${err instanceof Error ? err.message : String(err)}`, { details: { module: m } });
    }
    const given = mod.default ?? mod.extension;
    const ext = (typeof given === 'function' ? await (given as () => unknown)() : given) as Partial<Extension> | undefined;
    if (!ext || typeof ext !== 'object' || typeof ext.name !== 'string' || typeof ext.register !== 'function' || !Array.isArray(ext.tasks)) {
      throw new BerthError('extension_unloadable', `extension module ${m} exports no extension: its default export must be extension(...) or a function returning one`, { details: { module: m } });
    }
    out.push(ext as Extension);
  }
  return out;
}
