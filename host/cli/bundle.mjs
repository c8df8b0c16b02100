// Builds dist/berth.mjs: the CLI's TypeScript sources in one ES module (with the few pure-JS packages
// every command loads inlined, the other dependencies in node_modules), and dist/index.mjs: the package's library face (host/index.ts), every dependency left in node_modules (a program's own zod schemas meet the library's zod). `npm ci` runs it as `prepare`; host/cli/bin.mjs uses it while it is newer than
// every source file. Written beside its final name and renamed, so a CLI starting meanwhile never
// loads half a file.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
/** One entry point bundled to `dist/NAME.mjs`. */
async function bundle(entry, name) {
  const out = join(root, `dist/${name}.mjs`);
  const tmp = join(root, `dist/.${name}-${process.pid}.mjs`);
  await build({
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile: tmp,
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  renameSync(`${tmp}.map`, `${out}.map`);
  renameSync(tmp, out);
}

/**
 * The packages every `berth` command loads at start, inlined in the CLI's bundle: as ~250 separate
 * module files (zod ~100 with its locales, yaml ~70, pino and tar-stream with their helpers) their
 * resolution, reads and compiles were most of the CLI's start (bench/RESULTS.md, build session 12).
 * Only pure JavaScript: native modules (better-sqlite3) and what few commands load (dockerode
 * through createRequire, pg, openai, hono) stay in node_modules. The MCP SDK is inlined too, in the
 * chunks only `berth mcp` loads: from node_modules it loaded its own copy of zod (`zod/v4`, ~100
 * files again, every locale) and Ajv file by file, ~300 ms of CPU of a server's start on a loaded
 * machine, which a client reconnecting after a crash waits for; inlined, it uses the bundle's zod.
 */
const INLINE = new Set(['zod', 'yaml', 'pino', 'tar-stream', '@modelcontextprotocol/sdk']);
const packageName = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');
const inlineStartupPackages = {
  name: 'inline-startup-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return { path: args.path, external: true };
      // Inside an inlined package its own dependencies are inlined too (pino's sonic-boom, ...).
      if (args.importer.includes('/node_modules/')) return undefined;
      return INLINE.has(packageName(args.path)) ? undefined : { path: args.path, external: true };
    });
  },
};

/**
 * zod's locales in the CLI's bundle: English alone. zod exports every locale (~45, 366 KB of the
 * bundle's 2 MB, parsed at each start) on its `z` namespace, so no bundler drops them; Berth
 * never selects one, and English is the one zod uses when none is selected (zod/v4/classic/schemas
 * registers it), so every message stays word for word what it was.
 */
const englishOnlyZod = {
  name: 'english-only-zod',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes('/node_modules/zod/') ? { path: join(dirname(args.importer), '../locales/index.js'), namespace: 'zod-english' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-english' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(join(dirname(args.path), 'en.js'))};`,
      resolveDir: dirname(args.path),
    }));
  },
};

/**
 * Makes a bundle file ASCII: node decodes an all-ASCII module to a one-byte string (its start
 * decoded the 2 MB chunk ~10 ms faster), while a single other character (an em dash in a comment)
 * made the whole text two-byte. esbuild escapes every non-ASCII character of code (its default
 * charset) but copies the comments it keeps as they are, so what is left is in comments: each
 * UTF-16 unit becomes one `?`, which keeps every column of the source map.
 */
function asciiOnly(file) {
  const text = readFileSync(file, 'utf8');
  if (/[^\x00-\x7f]/.test(text)) writeFileSync(file, text.replace(/[^\x00-\x7f]/g, '?'));
}

/**
 * The CLI: its entry in `dist/berth.mjs`, and what only some commands import (serve, mcp) in
 * `dist/chunks/`, loaded when such a command runs, so every other command starts without them.
 * Chunk names carry their content's hash: they are moved in before the entry that names them.
 */
async function bundleCli() {
  const tmp = join(root, `dist/.berth-${process.pid}`);
  await build({
    entryPoints: { berth: join(root, 'host/cli/main.ts') },
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // The pure-JS packages every command loads are inlined (below); every other one stays in node_modules.
    plugins: [englishOnlyZod, inlineStartupPackages],
    // Inlined CommonJS (pino, tar-stream) calls require() for Node's own modules.
    banner: { js: "import { createRequire as __berthCreateRequire } from 'node:module'; const require = __berthCreateRequire(import.meta.url);" },
    outdir: tmp,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  for (const f of readdirSync(join(tmp, 'chunks'))) if (f.endsWith('.mjs')) asciiOnly(join(tmp, 'chunks', f));
  asciiOnly(join(tmp, 'berth.mjs'));
  mkdirSync(join(root, 'dist/chunks'), { recursive: true });
  const made = readdirSync(join(tmp, 'chunks'));
  for (const f of made) renameSync(join(tmp, 'chunks', f), join(root, 'dist/chunks', f));
  renameSync(join(tmp, 'berth.mjs.map'), join(root, 'dist/berth.mjs.map'));
  renameSync(join(tmp, 'berth.mjs'), join(root, 'dist/berth.mjs'));
  rmSync(tmp, { recursive: true, force: true });
  pruneChunks(made);
}

/** How many builds' chunks stay in dist/chunks (a `berth serve` of an earlier build still loads its own lazily). */
const KEPT_BUILDS = 3;

/**
 * Removes the chunks no recent build named. Each build's chunks differ by their hash, and they
 * were never removed: a developer's checkout held 584 of them (294 MB), which `npm pack` packed
 * and gzipped (40 s of the package test). The last builds' chunks stay for processes still running them.
 */
function pruneChunks(made) {
  const dir = join(root, 'dist/chunks');
  const list = join(dir, '.builds.json');
  let builds = [];
  try {
    builds = JSON.parse(readFileSync(list, 'utf8'));
  } catch {
    // No record yet (or a broken one): only this build's chunks are known.
  }
  builds = [...(Array.isArray(builds) ? builds : []), made].slice(-KEPT_BUILDS);
  const keep = new Set(builds.flat());
  for (const f of readdirSync(dir)) if (f !== '.builds.json' && !keep.has(f)) rmSync(join(dir, f), { force: true });
  writeFileSync(list, JSON.stringify(builds));
}

await bundle('host/index.ts', 'index');
await bundle('host/integrations/openai-agents.ts', 'openai-agents');
// Last: bin.mjs takes dist/berth.mjs as fresh once it is newer than every source.
await bundleCli();
