import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The CLI as `npm run build` makes it and `berth` (host/cli/bin.mjs) runs it: its start loaded
// ~250 module files of zod, yaml, pino and tar-stream one by one (bench/RESULTS.md, build session 12).
const root = process.cwd();
const dir = mkdtempSync(join(tmpdir(), 'berth-cli-bundle-'));
const seen = join(dir, 'resolved.txt');
// Records every module the ESM loader resolves (the hooks run on their own thread: a file is the channel).
const hooks = join(dir, 'hooks.mjs');
const register = join(dir, 'register.mjs');
// And every file CommonJS's require loaded (the bundle's own requires), listed at exit.
const listed = join(dir, 'required.txt');
const preload = join(dir, 'list-required.cjs');

beforeAll(() => {
  execFileSync(process.execPath, [join(root, 'host/cli/bundle.mjs')], { stdio: 'ignore' });
  writeFileSync(hooks, `import { appendFileSync } from 'node:fs';\nexport async function resolve(spec, ctx, next) {\n  const r = await next(spec, ctx);\n  appendFileSync(${JSON.stringify(seen)}, r.url + '\\n');\n  return r;\n}\n`);
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
  writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(listed)}, Object.keys(require.cache).join('\\n')));\n`);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const berth = (args: string[], env: Record<string, string> = {}) => {
  rmSync(seen, { force: true });
  rmSync(listed, { force: true });
  const r = spawnSync(process.execPath, ['--import', register, '--require', preload, join(root, 'host/cli/bin.mjs'), ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, env: { ...process.env, BERTH_NO_BUNDLE: '', ...env } });
  const loaded = [...readFileSync(seen, 'utf8').split('\n'), ...readFileSync(listed, 'utf8').split('\n')].filter(Boolean);
  return { ...r, loaded };
};

describe('the bundled berth CLI', () => {
  it('starts from the bundle without loading a module file of the packages it inlines (zod, yaml, pino, tar-stream)', () => {
    const r = berth(['--help']);
    expect(r.status).toBe(0);
    expect(r.loaded.some((u) => u.endsWith('/host/cli/code-cache.mjs'))).toBe(true);
    expect(r.loaded.filter((u) => u.endsWith('.ts'))).toEqual([]);
    const inlined = r.loaded.filter((u) => /\/node_modules\/(zod|yaml|pino|tar-stream|streamx|sonic-boom)\//.test(u));
    expect(inlined).toEqual([]);
  }, 180_000);

  it('validates an environment manifest through the inlined yaml and zod, naming the field of an invalid one', () => {
    const ok = join(dir, 'env.yaml');
    writeFileSync(ok, 'kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest" }\n');
    const good = berth(['env', 'validate', ok]);
    expect(good.stderr).toBe('');
    expect(good.stdout).toContain(`${ok}: valid`);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: 42 }\n');
    const refused = berth(['env', 'validate', bad]);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr + refused.stdout).toContain('image.ref');
  }, 300_000);

  it('talks to the engine without loading ssh2, which only an ssh:// DOCKER_HOST needs', () => {
    const r = berth(['gc', '--orphans', '--json', '--store', join(dir, 'none', 'berth.db')]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.loaded.some((f) => f.includes('/node_modules/dockerode/'))).toBe(true);
    expect(r.loaded.filter((f) => f.includes('/node_modules/ssh2/'))).toEqual([]);
  }, 180_000);

  it("keeps zod's English messages with its other locales left out of the bundle", async () => {
    const { RECORD_FORMAT, RECORD_SCHEMA_VERSION, recordDigest } = await import('../../host/record');
    const doc: Record<string, unknown> = { format: RECORD_FORMAT, schemaVersion: RECORD_SCHEMA_VERSION, run: 42 };
    doc.digest = recordDigest(doc);
    const file = join(dir, 'record.json');
    writeFileSync(file, JSON.stringify(doc));
    const r = berth(['import', file, '--store', join(dir, 'import.db')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('does not match run record version 1: exportedAt: Invalid input: expected number, received undefined');
    // zod's Dutch message for the same issue (nl.js): no other locale is in the bundle, and none was loaded.
    expect(readFileSync(join(root, 'dist/berth.cjs'), 'utf8')).not.toContain('Ongeldige invoer');
    expect(r.loaded.filter((u) => /\/node_modules\/zod\//.test(u))).toEqual([]);
  }, 180_000);

  it('serves MCP on stdio without loading the HTTP transport or the web server (hono)', () => {
    // stdin at its end at once: the server starts, then ends as a client that closed would end it.
    const r = berth(['mcp', '--store', join(dir, 'mcp.db')]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.loaded.filter((u) => /\/node_modules\/(hono|@hono)\/|streamableHttp/.test(u))).toEqual([]);
    // The SDK is inlined in the mcp chunks, on the bundle's zod: no second zod from node_modules.
    expect(r.loaded.filter((u) => /\/node_modules\/(@modelcontextprotocol|zod|ajv)\//.test(u))).toEqual([]);
  }, 180_000);
});

describe("the CLI's V8 code cache", () => {
  const timingOf = (stderr: string) => {
    const line = stderr.split('\n').find((l) => l.includes('"process.start"'));
    return line ? (JSON.parse(line) as { codeCache: string }) : undefined;
  };

  it('compiles the bundle from the cache of an earlier start of the same command, and replaces a cache that does not match instead of trusting it', async () => {
    const { openSqliteStore } = await import('../../host/store');
    const store = join(dir, 'cache.db');
    await openSqliteStore(store).close();
    const cache = join(dir, 'v8');
    const status = () => berth(['status', '--store', store], { BERTH_CODE_CACHE_DIR: cache, BERTH_LOG_LEVEL: 'debug' });

    const first = status();
    expect(first.status).toBe(0);
    expect(timingOf(first.stderr)?.codeCache).toBe('miss');
    const files = readdirSync(cache);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^berth-[0-9a-f]{8}-status-[0-9a-f]{16}\.bin$/);
    expect(timingOf(status().stderr)?.codeCache).toBe('hit');
    // A script compiled from a cache has no dynamic-import callback of its own: what the bundle
    // imports from outside (an extension here; openai, pg) goes through the loader's (failed before:
    // "A dynamic import callback was not specified").
    const ext = join(dir, 'noop-extension.mjs');
    writeFileSync(ext, "export default { name: 'noop', register() {}, tasks: [] };\n");
    const withExt = () => berth(['status', '--store', store, '--extension', ext], { BERTH_CODE_CACHE_DIR: cache, BERTH_LOG_LEVEL: 'debug' });
    withExt();
    const extended = withExt();
    expect(timingOf(extended.stderr)?.codeCache, extended.stderr).toBe('hit');
    expect(extended.status, extended.stderr).toBe(0);

    // Bytes V8 cannot take (a disk error, a cache from another build under the same name): the
    // bundle compiles from source, the command does its work, and the cache is written anew.
    writeFileSync(join(cache, files[0]!), Buffer.alloc(4096, 7), { mode: 0o600 });
    const altered = status();
    expect(altered.status).toBe(0);
    expect(altered.stdout).toBe(first.stdout);
    expect(timingOf(altered.stderr)?.codeCache).toBe('rejected');
    expect(timingOf(status().stderr)?.codeCache).toBe('hit');
  }, 180_000);

  it("a plan run starts from the cache the previous run left at its exit, though a run turns on V8's --expose-gc as it goes", async () => {
    // A run's heap bound (host/support/heap-bound.ts) sets --expose-gc; V8 keys a cache by its flags,
    // so a cache made at a run's exit was rejected at every next start (8 of 8) until bin.mjs set it first.
    const { planFixture } = await import('../support/plan-fixture');
    const fx = await planFixture([{ name: 't', run: 'true' }]);
    try {
      const run = () => berth(['run', fx.plan, '--store', fx.store], { BERTH_HOST_ID: fx.hostId, BERTH_CODE_CACHE_DIR: join(dir, 'v8-run'), BERTH_LOG_LEVEL: 'debug' });
      const first = run();
      expect(first.status, first.stderr.slice(-2000)).toBe(0);
      expect(timingOf(first.stderr)?.codeCache).toBe('miss');
      const second = run();
      expect(second.status, second.stderr.slice(-2000)).toBe(0);
      expect(timingOf(second.stderr)?.codeCache).toBe('hit');
    } finally {
      await fx.cleanup();
    }
  }, 300_000);

  it('never reads a cache from a directory other users may write, and works without one', async () => {
    const { openSqliteStore } = await import('../../host/store');
    const store = join(dir, 'open.db');
    await openSqliteStore(store).close();
    const shared = join(dir, 'shared');
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    const r = berth(['status', '--store', store], { BERTH_CODE_CACHE_DIR: shared, BERTH_LOG_LEVEL: 'debug' });
    expect(r.status).toBe(0);
    expect(timingOf(r.stderr)?.codeCache).toBe('off');
    expect(readdirSync(shared)).toEqual([]);
  }, 180_000);
});

describe("the bundled CLI's text", () => {
  it("keeps the web view's non-ASCII characters (its pages' tagged templates, which esbuild leaves as they are): berth serve's title reads 'runs · berth'", async () => {
    const { openSqliteStore } = await import('../../host/store');
    const store = join(dir, 'serve.db');
    await openSqliteStore(store).close();
    const child = spawn(process.execPath, [join(root, 'host/cli/bin.mjs'), 'serve', '--store', store, '--port', '0', '--no-token'], { env: { ...process.env, BERTH_NO_BUNDLE: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      const port = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`berth serve exited ${code}: ${out}`)));
      });
      const page = await (await fetch(`http://127.0.0.1:${port}/`)).text();
      // Before: every such character was a '?' in the bundle ("runs ? berth", "from ? to").
      expect(page).toContain('<title>runs \u00b7 berth</title>');
      expect(page).not.toContain('runs ? berth');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }, 120_000);
});
