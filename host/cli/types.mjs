// Builds dist/types: the declarations of the package's public face (host/index.ts and what it
// reaches), for consumers on any module resolution. tsc writes the specifiers as the sources
// have them (extensionless, resolved by a bundler); Node's ESM resolution (`nodenext`) needs the
// file named, so each relative specifier is rewritten to the `.js` of the file it resolves to.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const out = join(root, 'dist/types');
rmSync(out, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.types.json')], { stdio: 'inherit' });

/** `./x` as Node resolves it: `./x.js` when x.d.ts exists, `./x/index.js` for a folder. */
function withExtension(fromDir, spec) {
  if (/\.(js|mjs|cjs|json)$/.test(spec)) return spec;
  const abs = resolve(fromDir, spec);
  if (existsSync(`${abs}.d.ts`)) return `${spec}.js`;
  if (existsSync(join(abs, 'index.d.ts'))) return `${spec.replace(/\/$/, '')}/index.js`;
  return spec;
}

const RELATIVE = /((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]*|\.{1,2})(['"])/g;
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.d.ts')) {
      const text = readFileSync(path, 'utf8');
      const fixed = text.replace(RELATIVE, (_, a, spec, b) => `${a}${withExtension(dirname(path), spec)}${b}`);
      if (fixed !== text) writeFileSync(path, fixed);
    }
  }
}
walk(out);
