// Builds dist/berth.mjs: the CLI's TypeScript sources in one ES module (dependencies stay in
// node_modules), and dist/index.mjs: the package's library face (host/index.ts), the same way. `npm ci` runs it as `prepare`; host/cli/bin.mjs uses it while it is newer than
// every source file. Written beside its final name and renamed, so a CLI starting meanwhile never
// loads half a file.
import { renameSync } from 'node:fs';
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

await bundle('host/index.ts', 'index');
await bundle('host/integrations/openai-agents.ts', 'openai-agents');
// Last: bin.mjs takes dist/berth.mjs as fresh once it is newer than every source.
await bundle('host/cli/main.ts', 'berth');
