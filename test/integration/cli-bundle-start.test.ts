import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

beforeAll(() => {
  execFileSync(process.execPath, [join(root, 'host/cli/bundle.mjs')], { stdio: 'ignore' });
  writeFileSync(hooks, `import { appendFileSync } from 'node:fs';\nexport async function resolve(spec, ctx, next) {\n  const r = await next(spec, ctx);\n  appendFileSync(${JSON.stringify(seen)}, r.url + '\\n');\n  return r;\n}\n`);
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const berth = (args: string[]) => {
  rmSync(seen, { force: true });
  const r = spawnSync(process.execPath, ['--import', register, join(root, 'host/cli/bin.mjs'), ...args], { encoding: 'utf8', env: { ...process.env, BERTH_NO_BUNDLE: '' } });
  const loaded = readFileSync(seen, 'utf8').split('\n').filter(Boolean);
  return { ...r, loaded };
};

describe('the bundled berth CLI', () => {
  it('starts from the bundle without loading a module file of the packages it inlines (zod, yaml, pino, tar-stream)', () => {
    const r = berth(['--help']);
    expect(r.status).toBe(0);
    expect(r.loaded.some((u) => u.endsWith('/dist/berth.mjs'))).toBe(true);
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
    // CommonJS modules (dockerode's) are not seen by the ESM hooks: a preload lists require's cache at exit.
    const listed = join(dir, 'required.txt');
    const preload = join(dir, 'list-required.cjs');
    writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(listed)}, Object.keys(require.cache).join('\\n')));\n`);
    const r = spawnSync(process.execPath, ['--require', preload, join(root, 'host/cli/bin.mjs'), 'gc', '--orphans', '--json', '--store', join(dir, 'none', 'berth.db')], { encoding: 'utf8', env: { ...process.env, BERTH_NO_BUNDLE: '' } });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const required = readFileSync(listed, 'utf8').split('\n');
    expect(required.some((f) => f.includes('/node_modules/dockerode/'))).toBe(true);
    expect(required.filter((f) => f.includes('/node_modules/ssh2/'))).toEqual([]);
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
    const chunks = readdirSync(join(root, 'dist/chunks')).filter((f) => f.endsWith('.mjs'));
    const loaded = chunks.filter((f) => r.loaded.some((u) => u.endsWith(`/dist/chunks/${f}`)));
    expect(loaded.length).toBeGreaterThan(0);
    // zod's Dutch message for the same issue (nl.js): no other locale is loaded.
    for (const f of loaded) expect(readFileSync(join(root, 'dist/chunks', f), 'utf8')).not.toContain('Ongeldige invoer');
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
