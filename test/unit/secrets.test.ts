import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBerthError } from '../../host/errors';
import { loadPlan } from '../../host/plan';
import { tempStore } from '../support/temp-store';
import { checkSecretGrants, resolveSecrets, scrub, scrubDeep, StreamScrubber, type SecretDecl, type SecretSource } from '../../host/secrets';

const TOKEN = { name: 'API_TOKEN', value: 's3cr3t-value-42' };
const b64 = Buffer.from(TOKEN.value).toString('base64');

describe('scrub', () => {
  it('replaces the value and its base64 forms with a marker naming the secret', () => {
    const text = `a ${TOKEN.value} b ${b64} c ${Buffer.from(`${TOKEN.value}\n`).toString('base64')} d ${Buffer.from(TOKEN.value).toString('base64url')}`;
    const out = scrub(text, [TOKEN]);
    expect(out).not.toContain(TOKEN.value);
    expect(out).not.toContain(b64.replace(/=+$/, ''));
    expect(out.match(/\[redacted:API_TOKEN\]/g)).toHaveLength(4);
  });

  it('replaces the value embedded in base64 at every byte offset, standard and url-safe, and in hex of either case', () => {
    const value = 'sk-~?>>\u00e9-0123456789-abcdef';
    const secret = { name: 'K', value };
    for (const prefix of ['', 'a', 'ab', 'abc']) {
      for (const enc of ['base64', 'base64url'] as const) {
        const encoded = Buffer.from(`${prefix}${value}trailer`).toString(enc);
        const out = scrub(`x ${encoded} y`, [secret]);
        expect(out, `${enc} after ${prefix.length} bytes`).toContain('[redacted:K]');
        // What is left of the encoding carries at most a few bits of the value's first and last byte.
        const left = out.replace('x ', '').replace(' y', '').split('[redacted:K]');
        expect(Buffer.from(left.join(''), enc).toString('latin1')).not.toContain(value.slice(1, -1));
      }
    }
    const hex = Buffer.from(value).toString('hex');
    expect(scrub(`a ${hex} b ${hex.toUpperCase()} c`, [secret])).toBe('a [redacted:K] b [redacted:K] c');
  });

  it('finds base64 and hex forms split across stream chunks', () => {
    const value = 'split-secret-0123456789';
    const text = `1 ${Buffer.from(`ab${value}`).toString('base64')} 2 ${Buffer.from(value).toString('hex')} 3`;
    for (let i = 0; i <= text.length; i++) {
      const s = new StreamScrubber([{ name: 'S', value }]);
      const out = s.push(text.slice(0, i)) + s.push(text.slice(i)) + s.end();
      expect(out).not.toContain(Buffer.from(value).toString('hex'));
      expect(out.match(/\[redacted:S\]/g)).toHaveLength(2);
    }
  });

  it('leaves text without secrets unchanged', () => {
    expect(scrub('plain', [TOKEN])).toBe('plain');
    expect(scrub(`x ${TOKEN.value}`, [])).toBe(`x ${TOKEN.value}`);
  });

  it('scrubs every string of a nested value', () => {
    expect(scrubDeep({ a: [TOKEN.value], b: { c: `=${TOKEN.value}=` }, n: 1 }, [TOKEN])).toEqual({ a: ['[redacted:API_TOKEN]'], b: { c: '=[redacted:API_TOKEN]=' }, n: 1 });
  });

  it('catches a value split across stream chunks, whatever the split point', () => {
    const text = `before ${TOKEN.value} middle ${b64} after`;
    for (let i = 0; i <= text.length; i++) {
      for (const j of [i, Math.min(text.length, i + 3)]) {
        const s = new StreamScrubber([TOKEN]);
        const out = s.push(text.slice(0, i)) + s.push(text.slice(i, j)) + s.push(text.slice(j)) + s.end();
        expect(out).toBe('before [redacted:API_TOKEN] middle [redacted:API_TOKEN] after');
      }
    }
  });
});

const decls: SecretDecl[] = [
  { name: 'API_TOKEN', from: { env: 'HOST_TOKEN' }, expose: 'env', to: ['test'] },
  { name: 'KEY_FILE', from: { file: '/nonexistent/berth/key' }, expose: 'file', to: ['deploy'] },
];
const source = (env: Record<string, string>, files: Record<string, string> = {}): SecretSource => ({
  env: (n) => env[n],
  file: async (p) => {
    if (p in files) return files[p]!;
    throw Object.assign(new Error('nope'), { code: 'ENOENT' });
  },
});

describe('resolveSecrets', () => {
  it('reads values from the host environment and files, dropping one trailing newline of a file', async () => {
    const got = await resolveSecrets(decls, ['API_TOKEN', 'KEY_FILE'], {}, source({ HOST_TOKEN: 'abc' }, { '/nonexistent/berth/key': 'line\n' }));
    expect(got).toEqual([
      { name: 'API_TOKEN', value: 'abc', expose: 'env' },
      { name: 'KEY_FILE', value: 'line', expose: 'file' },
    ]);
  });

  it('names the secret and its source, never a value, when the host variable or file is missing', async () => {
    const e1 = await resolveSecrets(decls, ['API_TOKEN'], { runId: 'run_1' }, source({})).catch((e: unknown) => e);
    expect(isBerthError(e1, 'secret_unavailable')).toBe(true);
    expect((e1 as Error).message).toBe('secret API_TOKEN: host environment variable HOST_TOKEN is not set');
    expect((e1 as { ids: object }).ids).toEqual({ runId: 'run_1' });
    const e2 = await resolveSecrets(decls, ['KEY_FILE'], {}, source({})).catch((e: unknown) => e);
    expect(isBerthError(e2, 'secret_unavailable')).toBe(true);
    expect((e2 as Error).message).toContain('secret KEY_FILE: cannot read host file /nonexistent/berth/key (ENOENT)');
  });
});

describe('checkSecretGrants', () => {
  it('accepts a step that uses only secrets given to it', () => {
    expect(() => checkSecretGrants(decls, [{ kind: 'step', name: 'test', secrets: ['API_TOKEN'] }], 'plan.yaml')).not.toThrow();
  });

  it('refuses an undeclared secret and a secret not given to the step, naming both', () => {
    expect(() => checkSecretGrants(decls, [{ kind: 'step', name: 'test', secrets: ['NOPE'] }], 'plan.yaml')).toThrow('plan.yaml: step test uses secret NOPE, which the environment does not declare');
    expect(() => checkSecretGrants(decls, [{ kind: 'step', name: 'test', secrets: ['KEY_FILE'] }], 'plan.yaml')).toThrow(
      'plan.yaml: step test uses secret KEY_FILE, but the environment gives it only to deploy',
    );
  });

  it('is applied when a plan is loaded', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-secrets-'));
    writeFileSync(
      join(dir, 'env.yaml'),
      `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "sha256:${'0'.repeat(64)}" }\nsecrets:\n  - { name: API_TOKEN, from: { env: HOST_TOKEN }, expose: env, to: [build] }\n`,
    );
    writeFileSync(join(dir, 'plan.yaml'), 'environment: env.yaml\nsteps:\n  - { name: test, run: "true", secrets: [API_TOKEN] }\n');
    const err = await loadPlan(join(dir, 'plan.yaml')).catch((e: unknown) => e);
    expect(isBerthError(err, 'secret_not_allowed')).toBe(true);
    expect((err as Error).message).toContain('step test uses secret API_TOKEN');
  });
});

describe('store file permissions', () => {
  it('creates the store file and its WAL readable by the owner only, whatever the umask', async () => {
    const old = process.umask(0o022);
    try {
      const t = tempStore();
      await t.store.listRuns();
      const { statSync, existsSync } = await import('node:fs');
      for (const f of [t.path, `${t.path}-wal`, `${t.path}-shm`]) if (existsSync(f)) expect((statSync(f).mode & 0o777).toString(8), f).toBe('600');
      expect(existsSync(`${t.path}-wal`)).toBe(true);
      await t.cleanup();
    } finally {
      process.umask(old);
    }
  });
});
