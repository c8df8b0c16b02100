// Builds dist/berth.cjs: the CLI's TypeScript sources in one CommonJS script (with the few pure-JS packages
// every command loads inlined, the other dependencies in node_modules), and dist/index.mjs: the package's library face (host/index.ts), every dependency left in node_modules (a program's own zod schemas meet the library's zod). `npm ci` runs it as `prepare`; host/cli/bin.mjs uses it while it is newer than
// every source file. Written beside its final name and renamed, so a CLI starting meanwhile never
// loads half a file.
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { bundleIsFresh } from './bundle-fresh.mjs';

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
 * Makes a bundle file ASCII: node decodes an all-ASCII file to a one-byte string (its start
 * decoded the 2 MB chunk ~10 ms faster), while a single other character (an em dash in a comment)
 * made the whole text two-byte. esbuild escapes the non-ASCII characters of strings (its default
 * charset) but not those of a tagged template, whose raw text is the tag's to read, nor of the
 * comments it keeps. Each UTF-16 unit left becomes its `\uXXXX` escape, which means the same
 * character in a template's cooked text (what the web view's `html` tag reads), a string, a regular
 * expression or an identifier, and is inert in a comment. (They were `?` until session 32: the
 * CLI's web view showed "runs ? berth" and "from ? to".) Columns after one on its line move in the
 * source map; stacks only name such lines in the web view's templates.
 */
function asciiOnly(file) {
  const text = readFileSync(file, 'utf8');
  if (/[^\x00-\x7f]/.test(text)) writeFileSync(file, text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * The CLI: every source and inlined package in one CommonJS file, `dist/berth.cjs`, which
 * host/cli/code-cache.mjs runs with V8's code cache (Node 20 keeps none for ES modules: compiling
 * the bundle was ~70 ms of every start). What only some commands use (serve, mcp) is in the same
 * file but evaluated only when imported (esbuild's lazy module wrappers), and with the cache its
 * compile costs nothing either. Built beside its final name and renamed, map first.
 */
async function bundleCli() {
  const tmp = join(root, `dist/.berth-${process.pid}.cjs`);
  await build({
    entryPoints: [join(root, 'host/cli/main.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // The pure-JS packages every command loads are inlined (below); every other one stays in node_modules.
    plugins: [englishOnlyZod, inlineStartupPackages],
    // The one use (docker-client.ts's createRequire) needs the bundle's own URL.
    define: { 'import.meta.url': '__berthBundleUrl' },
    banner: { js: "const __berthBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    outfile: tmp,
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  asciiOnly(tmp);
  // The map keeps its final name (the bundle's last line names `berth.cjs.map`... of the tmp name: fix it).
  const text = readFileSync(tmp, 'utf8').replace(/\/\/# sourceMappingURL=\S+\s*$/, '//# sourceMappingURL=berth.cjs.map\n');
  writeFileSync(tmp, text);
  renameSync(`${tmp}.map`, join(root, 'dist/berth.cjs.map'));
  renameSync(tmp, join(root, 'dist/berth.cjs'));
  // What earlier builds made for the ES-module CLI (dist/berth.mjs and its chunks): gone, so a
  // packed package never carries them.
  rmSync(join(root, 'dist/chunks'), { recursive: true, force: true });
  for (const f of ['berth.mjs', 'berth.mjs.map']) rmSync(join(root, 'dist', f), { force: true });
}

// `--if-stale`: nothing to do while dist/berth.cjs is newer than every source (the test suite's
// setup: its CLI starts run the bundle, as `berth` does, and an edit must not leave them the old one).
if (process.argv.includes('--if-stale') && bundleIsFresh(root)) process.exit(0);
await bundle('host/index.ts', 'index');
await bundle('host/integrations/openai-agents.ts', 'openai-agents');
// Last: bin.mjs takes dist/berth.cjs as fresh once it is newer than every source.
await bundleCli();
