import { describe, expect, it } from 'vitest';
import { EnvironmentSchema, type Environment } from '../../environment';
import { checkAgentSecrets, resolveToolSecrets, runSecretNames, secretHint } from '../../host/agent/run-secrets';
import { BerthError, isBerthError } from '../../host/errors';
import { ScrubbedStream, scrubError, type SecretSource } from '../../host/secrets';

const TOKEN = { name: 'TOKEN', value: 'tok-0123456789-abcdef' };
const KEY = { name: 'DEPLOY_KEY', value: 'key-zyxwvut-98765' };
const TOOLS = ['exec', 'read_file', 'list_files', 'search', 'write_file', 'edit'];

function env(secrets: unknown[]): Environment {
  return EnvironmentSchema.parse({ kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' }, image: { ref: 'berth/tiny:latest' }, secrets });
}

const source = (vars: Record<string, string>, files: Record<string, string> = {}): SecretSource => ({
  env: (n) => vars[n],
  file: async (p) => {
    if (p in files) return files[p]!;
    throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
  },
});

const ENV = env([
  { name: 'TOKEN', from: { env: 'T' }, expose: 'env', to: ['exec'] },
  { name: 'DEPLOY_KEY', from: { file: '/k' }, expose: 'file', to: ['search'] },
  { name: 'UNUSED', from: { env: 'NOT_SET' }, expose: 'env', to: [] },
]);
const SRC = source({ T: TOKEN.value }, { '/k': `${KEY.value}\n` });

async function thrown(p: Promise<unknown>): Promise<BerthError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!isBerthError(err)) throw new Error(`expected a BerthError, got ${String(err)}`);
  return err;
}

describe('agent run secrets', () => {
  it('the run secrets are those given to at least one tool; a secret given to nobody is neither read nor required', async () => {
    expect(runSecretNames(ENV)).toEqual(['TOKEN', 'DEPLOY_KEY']);
    const s = await resolveToolSecrets(ENV, 'exec', {}, SRC);
    expect(s.granted.map((x) => x.name)).toEqual(['TOKEN']);
    expect(s.all).toEqual([
      { name: 'TOKEN', value: TOKEN.value, expose: 'env' },
      { name: 'DEPLOY_KEY', value: KEY.value, expose: 'file' },
    ]);
  });

  it('a tool granted nothing still gets every run secret to scrub its output with', async () => {
    const s = await resolveToolSecrets(ENV, 'read_file', {}, SRC);
    expect(s.granted).toEqual([]);
    expect(s.all.map((x) => x.name)).toEqual(['TOKEN', 'DEPLOY_KEY']);
  });

  it('a secret that cannot be read stops every tool, with an error naming the secret and its source, never a value', async () => {
    const err = await thrown(resolveToolSecrets(ENV, 'read_file', { runId: 'r1' }, source({ T: TOKEN.value })));
    expect(err.code).toBe('secret_unavailable');
    expect(err.message).toBe('secret DEPLOY_KEY: cannot read host file /k (ENOENT)');
    expect(err.message).not.toContain(TOKEN.value);
    expect(err.ids).toEqual({ runId: 'r1' });
  });

  it('refuses a manifest that gives a secret to a name that is not a tool, naming secrets.N.to.M and the tools', async () => {
    const bad = env([
      { name: 'TOKEN', from: { env: 'T' }, expose: 'env', to: ['exec', 'deploy'] },
      { name: 'OTHER', from: { env: 'T' }, expose: 'env', to: ['build-step'] },
    ]);
    const err = await thrown(checkAgentSecrets(bad, TOOLS, 'env.yaml', SRC));
    expect(err.code).toBe('manifest_invalid');
    expect(err.message).toBe(
      'env.yaml: secrets given to something that is not a tool (2 problems):\n' +
        `  secrets.0.to.1: expected the name of a tool (${TOOLS.join(', ')}), found "deploy"\n` +
        `  secrets.1.to.0: expected the name of a tool (${TOOLS.join(', ')}), found "build-step"`,
    );
    expect((err.details as { issues: Array<{ path: string }> }).issues.map((i) => i.path)).toEqual(['secrets.0.to.1', 'secrets.1.to.0']);
  });

  it('refuses a run whose secrets cannot be read now, and accepts one whose can', async () => {
    expect((await thrown(checkAgentSecrets(ENV, TOOLS, 'env.yaml', source({})))).message).toBe('secret TOKEN: host environment variable T is not set');
    await expect(checkAgentSecrets(ENV, TOOLS, 'env.yaml', SRC)).resolves.toBeUndefined();
  });

  it('tells the model the names and how to find them, only for the tools given them', () => {
    expect(secretHint(ENV, 'exec')).toContain('$TOKEN (environment variable)');
    expect(secretHint(ENV, 'search')).toContain('$DEPLOY_KEY_FILE (path of a file holding DEPLOY_KEY)');
    expect(secretHint(ENV, 'read_file')).toBe('');
  });
});

describe('scrubbed command output', () => {
  const b64 = Buffer.from(TOKEN.value).toString('base64');

  it('catches a value split across chunks, wherever the split falls, and shows every other character', () => {
    const text = `start ${TOKEN.value} mid ${b64} end\n`;
    for (let i = 0; i <= text.length; i++) {
      const s = new ScrubbedStream([TOKEN], 1 << 16);
      const shown = s.push(Buffer.from(text.slice(0, i))) + s.push(Buffer.from(text.slice(i))) + s.end();
      expect(shown).toBe('start [redacted:TOKEN] mid [redacted:TOKEN] end\n');
      expect(s.text()).toBe(shown);
    }
  });

  it('joins a character whose bytes are split across chunks before scrubbing', () => {
    const secret = { name: 'TOKEN', value: 'pässwörd-ünïcode-42' };
    const bytes = Buffer.from(`x${secret.value}y`);
    for (let i = 0; i <= bytes.length; i++) {
      const s = new ScrubbedStream([secret], 1 << 16);
      expect(s.push(bytes.subarray(0, i)) + s.push(bytes.subarray(i)) + s.end()).toBe('x[redacted:TOKEN]y');
    }
  });

  it('caps the scrubbed text to head and tail, so a cut never keeps part of a value', () => {
    const s = new ScrubbedStream([TOKEN], 100);
    // The value straddles the head cut (50 characters) and the tail cut.
    const text = `${'h'.repeat(45)}${TOKEN.value}${'m'.repeat(500)}${TOKEN.value}${'t'.repeat(45)}`;
    for (let i = 0; i < text.length; i += 7) s.push(Buffer.from(text.slice(i, i + 7)));
    s.end();
    expect(s.truncated).toBe(true);
    const kept = s.text();
    for (let n = 4; n <= TOKEN.value.length; n++) {
      expect(kept).not.toContain(TOKEN.value.slice(0, n));
      expect(kept).not.toContain(TOKEN.value.slice(-n));
    }
    expect(kept.startsWith(`${'h'.repeat(45)}[reda`)).toBe(true);
    expect(kept).toMatch(/\n\[\.\.\. \d+ characters truncated \.\.\.\]\n/);
    expect(kept.endsWith(`KEN]${'t'.repeat(45)}`)).toBe(true);
  });
});

describe('scrubError', () => {
  it('scrubs message, stack, details and causes in place, keeping the class, code and retryable', () => {
    const cause = new Error(`inner ${TOKEN.value}`);
    const err = new BerthError('engine_gone', `outer ${TOKEN.value}`, { retryable: true, details: { out: `x ${TOKEN.value}` }, cause });
    expect(scrubError(err, [TOKEN])).toBe(err);
    expect(err).toBeInstanceOf(BerthError);
    expect([err.code, err.retryable]).toEqual(['engine_gone', true]);
    expect(err.message).toBe('outer [redacted:TOKEN]');
    expect(err.stack).not.toContain(TOKEN.value);
    expect(err.details).toEqual({ out: 'x [redacted:TOKEN]' });
    expect(cause.message).toBe('inner [redacted:TOKEN]');
  });
});
