// Runs the CLI's bundle (dist/berth.cjs) as a CommonJS script compiled with V8's code cache.
//
// Why: compiling the 3 MB bundle, then each function the command calls, was ~70 ms of CPU at every
// start of every `berth` command (bench/RESULTS.md, session 32), and Node 20 keeps no compile cache
// for ES modules. A `vm.Script` accepts the cached data V8 produced for the same source in an earlier
// run: V8 checks it against the source and its flags and rejects it (the script compiles as before)
// when it does not match, so a stale cache costs nothing but a rewrite.
//
// One cache file per command (what `status` compiles is not what `run` compiles), produced at the
// exit of a run that found none or had it rejected. V8's deserializer trusts its input, so a cache is
// only read from a directory this user owns that no one else may write: dist/.v8-cache beside the
// bundle when this user owns dist/, else ~/.cache/berth/v8 (XDG_CACHE_HOME), or BERTH_CODE_CACHE_DIR.
// Anything wrong with it (read-only, another owner, writable by others, no home) means no cache,
// never a failure.
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import vm from 'node:vm';

const require = createRequire(import.meta.url);
const Module = require('node:module');

/** A directory this user owns and only this user may write, created if missing; null if none is. */
function ownDir(dir) {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = statSync(dir);
    if (typeof process.getuid === 'function' && st.uid !== process.getuid()) return null;
    return (st.mode & 0o022) === 0 ? dir : null;
  } catch {
    return null;
  }
}

function cacheDir(bundle) {
  if (process.env.BERTH_CODE_CACHE_DIR) return ownDir(process.env.BERTH_CODE_CACHE_DIR);
  const dist = dirname(bundle);
  try {
    const st = statSync(dist);
    if (typeof process.getuid !== 'function' || st.uid === process.getuid()) {
      const own = ownDir(join(dist, '.v8-cache'));
      if (own) return own;
    }
  } catch {
    // No dist directory to stat: the home cache below.
  }
  try {
    const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
    return ownDir(join(base, 'berth', 'v8'));
  } catch {
    return null;
  }
}

/** The cache's file: the bundle (size, mtime), node's version and flags, and the command pick it. */
function cacheFile(dir, bundle, st, command) {
  const key = createHash('sha256')
    .update(`${bundle}\0${st.size}\0${st.mtimeMs}\0${process.version}\0${process.arch}\0${process.execArgv.join(' ')}`)
    .digest('hex')
    .slice(0, 16);
  const name = /^[a-z-]{1,20}$/.test(command ?? '') ? command : 'other';
  const where = createHash('sha256').update(bundle).digest('hex').slice(0, 8);
  return { file: join(dir, `berth-${where}-${name}-${key}.bin`), prefix: `berth-${where}-${name}-` };
}

/** Removes this command's caches of earlier builds of the same bundle (one file per command stays). */
function pruneOthers(dir, prefix, keep) {
  try {
    for (const f of readdirSync(dir)) {
      if (f.startsWith(prefix) && /^[0-9a-f]{16}\.bin$/.test(f.slice(prefix.length)) && join(dir, f) !== keep) rmSync(join(dir, f), { force: true });
    }
  } catch {
    // Left for the next write.
  }
}

/** The file's bytes when it is a regular file of this user's; undefined otherwise. */
function readOwn(file) {
  let fd;
  try {
    fd = openSync(file, 'r');
    const st = fstatSync(fd);
    if (!st.isFile() || (typeof process.getuid === 'function' && st.uid !== process.getuid()) || (st.mode & 0o022) !== 0) return undefined;
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Runs `bundle` (a CommonJS file) as node would `require` it, with the code cache of `command`.
 * Returns how the cache served: `hit`, `rejected` (rewritten at exit), `miss` (written at exit)
 * or `off` (no cache directory). `BERTH_CODE_CACHE=0` turns the cache off.
 */
export function runCached(bundle, command) {
  // Stack traces through the source map (`--debug`): node maps the files `require` compiles, not a
  // vm.Script's. A start that prints stacks can be a little slower.
  if (process.sourceMapsEnabled) {
    require(bundle);
    return 'off';
  }
  const st = statSync(bundle);
  const source = readFileSync(bundle, 'utf8');
  const dir = process.env.BERTH_CODE_CACHE === '0' ? null : cacheDir(bundle);
  const { file, prefix } = dir ? cacheFile(dir, bundle, st, command) : { file: null, prefix: '' };
  const cached = file ? readOwn(file) : undefined;
  const script = new vm.Script(Module.wrap(source), {
    filename: bundle,
    cachedData: cached,
    // `import()` inside the bundle (an extension module, tsx's loader) goes to node's own loader.
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const state = !file ? 'off' : !cached ? 'miss' : script.cachedDataRejected ? 'rejected' : 'hit';
  if (state === 'miss' || state === 'rejected') {
    // At exit, every function the command compiled is in the data: the next start skips them all.
    process.once('exit', () => {
      try {
        const tmp = `${file}.${process.pid}.tmp`;
        writeFileSync(tmp, script.createCachedData(), { mode: 0o600 });
        renameSync(tmp, file);
        pruneOthers(dir, prefix, file);
      } catch {
        // A cache that cannot be written is only a slower next start.
      }
    });
  }
  // A script compiled from a cache keeps no dynamic-import callback: the bundle's imports of what
  // it leaves outside (openai, pg, extensions) go through this module's own (host/support/load-module.ts).
  globalThis[Symbol.for('berth.import')] = (specifier) => import(specifier);
  // Read by the command's `process.start` timing line (BERTH_LOG_LEVEL=debug).
  globalThis[Symbol.for('berth.codeCache')] = state;
  const mod = new Module(bundle, null);
  mod.filename = bundle;
  mod.paths = Module._nodeModulePaths(dirname(bundle));
  mod.loaded = true;
  const localRequire = (id) => mod.require(id);
  localRequire.resolve = (request, options) => Module._resolveFilename(request, mod, false, options);
  localRequire.main = process.mainModule;
  localRequire.cache = Module._cache;
  script.runInThisContext()(mod.exports, localRequire, mod, bundle, dirname(bundle));
  return state;
}
