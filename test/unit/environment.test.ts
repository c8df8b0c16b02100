import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BerthError } from '../../host/errors';
import {
  EnvironmentSchema,
  JSON_SCHEMA_FILE,
  canonicalJson,
  checkEngineCapacity,
  checkSupported,
  environmentJsonSchema,
  fingerprint,
  loadEnvironment,
  parseEnvironment,
  requireLocked,
  satisfiesRange,
  withImageDigest,
  type ManifestIssue,
} from '../../environment';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

const MINIMAL_YAML = `# the smallest useful manifest
kernel:
  name: berth # harness kind
  version: 0.1.0
  compatible: ">=0.1.0 <0.2.0"
image:
  ref: berth/tiny:latest
`;

/** A manifest with every section, as JSON-ready data; tests mutate a deep copy. */
function full(): Record<string, any> {
  return {
    kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' },
    image: { ref: 'berth/tiny:latest', digest: DIGEST },
    workspace: { path: '/workspace', owner: '1000:1000' },
    network: { mode: 'none', allow: ['api.example.com:443', '*.example.org:8080'] },
    secrets: [{ name: 'API_TOKEN', from: { env: 'HOST_TOKEN' }, expose: 'env', to: ['build'] }],
    resources: { cpus: 2, memoryMb: 1024, pids: 512, diskMb: 2048, commandTimeoutS: 300, runBudgetS: 3600 },
    lease: { ttlS: 600, heartbeatS: 20 },
    snapshot: { policy: 'never', keepLast: 3 },
  };
}

function failure(text: string, file: string): BerthError {
  try {
    parseEnvironment(text, file);
  } catch (err) {
    expect(err).toBeInstanceOf(BerthError);
    return err as BerthError;
  }
  throw new Error('expected parseEnvironment to throw');
}

function issuesOf(err: BerthError): ManifestIssue[] {
  return (err.details?.issues ?? []) as ManifestIssue[];
}

function invalidJson(mutate: (m: Record<string, any>) => void): { err: BerthError; issues: ManifestIssue[] } {
  const m = full();
  mutate(m);
  const err = failure(JSON.stringify(m), 'env.json');
  expect(err.code).toBe('manifest_invalid');
  return { err, issues: issuesOf(err) };
}

describe('parseEnvironment', () => {
  it('applies every default to a minimal YAML manifest', () => {
    const env = parseEnvironment(MINIMAL_YAML, 'env.yaml');
    expect(env.workspace).toEqual({ path: '/workspace', owner: '1000:1000' });
    expect(env.network).toEqual({ mode: 'none', allow: [] });
    expect(env.secrets).toEqual([]);
    expect(env.resources).toEqual({ cpus: 1, memoryMb: 512, pids: 256, diskMb: 1024, commandTimeoutS: 600, runBudgetS: 86400 });
    expect(env.lease).toEqual({ ttlS: 900, heartbeatS: 30 });
    expect(env.snapshot).toEqual({ policy: 'after-each-step', keepLast: 5 });
    expect(env.image.digest).toBeUndefined();
  });

  it('accepts a full JSON manifest and keeps its values', () => {
    const env = parseEnvironment(JSON.stringify(full()), 'env.json');
    expect(env).toEqual(full());
  });

  it('reads JSON content from a file without a telling extension', () => {
    expect(parseEnvironment(JSON.stringify(full()), 'manifest').resources.memoryMb).toBe(1024);
  });
});

describe('a malformed manifest is refused with the exact field and what was found', () => {
  const cases: Array<{ name: string; mutate: (m: Record<string, any>) => void; path: string; found: string; expected?: RegExp }> = [
    { name: 'a number where a string belongs', mutate: (m) => (m.kernel.name = 42), path: 'kernel.name', found: '42', expected: /string/ },
    { name: 'a missing required field', mutate: (m) => delete m.image.ref, path: 'image.ref', found: 'missing', expected: /string/ },
    { name: 'an unknown top-level field', mutate: (m) => (m.volumes = ['/data']), path: 'volumes', found: '["/data"]' },
    { name: 'an unknown nested field', mutate: (m) => (m.resources.gpus = 1), path: 'resources.gpus', found: '1' },
    { name: 'a digest that is not sha256 hex', mutate: (m) => (m.image.digest = 'sha256:XYZ'), path: 'image.digest', found: '"sha256:XYZ"', expected: /64 lowercase hex/ },
    { name: 'a relative workspace path', mutate: (m) => (m.workspace.path = 'work'), path: 'workspace.path', found: '"work"', expected: /absolute/ },
    { name: 'a workspace path with ..', mutate: (m) => (m.workspace.path = '/workspace/../etc'), path: 'workspace.path', found: '"/workspace/../etc"', expected: /\.\./ },
    { name: 'the workspace at /', mutate: (m) => (m.workspace.path = '/'), path: 'workspace.path', found: '"/"', expected: /not \/ itself/ },
    { name: 'a heartbeat not shorter than the ttl', mutate: (m) => (m.lease = { ttlS: 30, heartbeatS: 30 }), path: 'lease.heartbeatS', found: '30', expected: /ttlS/ },
    { name: 'an allow pattern without a port', mutate: (m) => (m.network.allow = ['api.example.com']), path: 'network.allow.0', found: '"api.example.com"', expected: /explicit port/ },
    { name: 'an allow pattern with a wildcard in the middle', mutate: (m) => (m.network.allow = ['ok.example.com:443', 'a.*.example.com:443']), path: 'network.allow.1', found: '"a.*.example.com:443"', expected: /\*\.suffix/ },
    { name: 'an allow pattern with port 0', mutate: (m) => (m.network.allow = ['api.example.com:0']), path: 'network.allow.0', found: '"api.example.com:0"', expected: /1 to 65535/ },
    { name: 'an allow pattern with port 70000', mutate: (m) => (m.network.allow = ['api.example.com:70000']), path: 'network.allow.0', found: '"api.example.com:70000"', expected: /1 to 65535/ },
    { name: 'memoryMb below 16', mutate: (m) => (m.resources.memoryMb = 8), path: 'resources.memoryMb', found: '8', expected: />= 16/ },
    { name: 'a fractional pids limit', mutate: (m) => (m.resources.pids = 10.5), path: 'resources.pids', found: '10.5', expected: /integer/ },
    { name: 'zero cpus', mutate: (m) => (m.resources.cpus = 0), path: 'resources.cpus', found: '0', expected: /> 0/ },
    { name: 'a kernel range it cannot read', mutate: (m) => (m.kernel.compatible = '~0.1'), path: 'kernel.compatible', found: '"~0.1"', expected: /range/ },
    { name: 'a kernel range that excludes its own version', mutate: (m) => (m.kernel.compatible = '>=0.2.0'), path: 'kernel.compatible', found: '">=0.2.0"', expected: /kernel\.version/ },
    { name: 'a kernel version that is not semver', mutate: (m) => (m.kernel.version = '1.0'), path: 'kernel.version', found: '"1.0"', expected: /semver/ },
    { name: 'an unknown network mode', mutate: (m) => (m.network.mode = 'bridge'), path: 'network.mode', found: '"bridge"', expected: /"allowlist"/ },
    { name: 'a lowercase secret name', mutate: (m) => (m.secrets[0].name = 'api_token'), path: 'secrets.0.name', found: '"api_token"', expected: /UPPER_SNAKE/ },
    { name: 'a secret from both env and file', mutate: (m) => (m.secrets[0].from = { env: 'A', file: '/b' }), path: 'secrets.0.from', found: '{"env":"A","file":"/b"}', expected: /env.*file/ },
    { name: 'an owner that is a name', mutate: (m) => (m.workspace.owner = 'berth'), path: 'workspace.owner', found: '"berth"', expected: /uid:gid/ },
    { name: 'a root workspace owner without allowRootOwner', mutate: (m) => (m.workspace.owner = '0:0'), path: 'workspace.owner', found: '"0:0"', expected: /allowRootOwner/ },
    { name: 'a workspace under /etc without allowSystemPath', mutate: (m) => (m.workspace.path = '/etc/app'), path: 'workspace.path', found: '"/etc/app"', expected: /allowSystemPath/ },
    { name: 'a workspace at /proc without allowSystemPath', mutate: (m) => (m.workspace.path = '/proc'), path: 'workspace.path', found: '"/proc"', expected: /allowSystemPath/ },
    { name: 'a workspace under /dev without allowSystemPath', mutate: (m) => (m.workspace.path = '/dev/shm/ws'), path: 'workspace.path', found: '"/dev/shm/ws"', expected: /allowSystemPath/ },
    { name: 'a workspace under /sys without allowSystemPath', mutate: (m) => (m.workspace.path = '/sys/fs'), path: 'workspace.path', found: '"/sys/fs"', expected: /allowSystemPath/ },
    { name: 'keepLast of zero', mutate: (m) => (m.snapshot.keepLast = 0), path: 'snapshot.keepLast', found: '0', expected: />= 1/ },
  ];

  for (const c of cases) {
    it(`refuses ${c.name} at ${c.path}`, () => {
      const { err, issues } = invalidJson(c.mutate);
      expect(issues).toHaveLength(1);
      const [issue] = issues;
      expect(issue?.path).toBe(c.path);
      expect(issue?.found).toBe(c.found);
      if (c.expected) expect(issue?.expected).toMatch(c.expected);
      expect(err.message).toContain('env.json');
      expect(err.message).toContain(`${c.path}:`);
      expect(err.message).toContain(c.found);
    });
  }

  it('names the default it checked when a cross-field rule fails on an omitted field', () => {
    const { issues } = invalidJson((m) => (m.lease = { ttlS: 10 }));
    expect(issues).toEqual([expect.objectContaining({ path: 'lease.heartbeatS', found: '30 (default)' })]);
  });

  it('reports every problem, one line each', () => {
    const { err, issues } = invalidJson((m) => {
      m.resources.memoryMb = 1;
      m.extra = true;
      delete m.kernel.version;
    });
    expect(issues.map((i) => i.path).sort()).toEqual(['extra', 'kernel.version', 'resources.memoryMb']);
    expect(err.message.split('\n')).toHaveLength(4);
    expect(err.message).toMatch(/kernel\.version: expected .*string.*, found missing/);
  });

  it('reports a YAML syntax error with its line and column', () => {
    const err = failure('kernel:\n  name: berth\n  version: [0.1.0\nimage: {}\n', 'env.yaml');
    expect(err.code).toBe('manifest_syntax');
    expect(err.details).toMatchObject({ file: 'env.yaml', line: expect.any(Number), column: expect.any(Number) });
    expect(err.message).toMatch(/^env\.yaml:\d+:\d+: /);
  });

  it('treats a duplicated YAML key as a syntax error rather than letting the last one win', () => {
    const err = failure(`${MINIMAL_YAML}image:\n  ref: other:latest\n`, 'env.yml');
    expect(err.code).toBe('manifest_syntax');
    expect(err.details).toMatchObject({ line: 8 });
  });

  it('reports a JSON syntax error with its line and column', () => {
    const err = failure('{\n  "kernel": {,\n}', 'env.json');
    expect(err.code).toBe('manifest_syntax');
    expect(err.details).toMatchObject({ line: 2, column: 14 });
  });

  it('reports an empty file as a missing manifest at the root', () => {
    const err = failure('', 'env.yaml');
    expect(err.code).toBe('manifest_invalid');
    expect(issuesOf(err)).toEqual([expect.objectContaining({ path: '(root)', found: 'missing' })]);
  });
});

describe('loadEnvironment', () => {
  it('reads and parses a file from disk', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-env-'));
    await writeFile(join(dir, 'env.yaml'), MINIMAL_YAML);
    expect((await loadEnvironment(join(dir, 'env.yaml'))).kernel.name).toBe('berth');
  });

  it('says manifest_not_found for a file that does not exist', async () => {
    await expect(loadEnvironment('/nonexistent/env.yaml')).rejects.toMatchObject({ code: 'manifest_not_found' });
  });

  it('says manifest_unreadable naming the path for a directory given as the manifest (it was an internal EISDIR error)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-env-dir-'));
    await expect(loadEnvironment(dir)).rejects.toMatchObject({ code: 'manifest_unreadable', message: `cannot read environment manifest ${dir}: it is a directory, not a file`, details: { file: dir } });
  });
});

describe('fingerprint', () => {
  const base = parseEnvironment(JSON.stringify(full()), 'env.json');

  it('is sha256 of the canonical JSON', () => {
    expect(fingerprint(base)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('does not depend on key order', () => {
    const m = full();
    const reordered = Object.fromEntries(Object.entries(m).reverse().map(([k, v]) => [k, typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v]));
    expect(fingerprint(parseEnvironment(JSON.stringify(reordered), 'env.json'))).toBe(fingerprint(base));
  });

  it('is the same for YAML and JSON of the same manifest, with or without defaults written out', () => {
    const fromYaml = parseEnvironment(MINIMAL_YAML, 'env.yaml');
    const explicit = { ...parseEnvironment(MINIMAL_YAML, 'env.yaml') };
    expect(fingerprint(parseEnvironment(JSON.stringify(explicit, null, 4), 'env.json'))).toBe(fingerprint(fromYaml));
  });

  it('changes when a resource limit changes', () => {
    const m = full();
    m.resources.memoryMb = 2048;
    expect(fingerprint(parseEnvironment(JSON.stringify(m), 'env.json'))).not.toBe(fingerprint(base));
  });

  it('canonicalJson sorts keys at every depth and keeps array order', () => {
    expect(canonicalJson({ b: [3, { z: 1, a: 2 }], a: 'x', u: undefined })).toBe('{"a":"x","b":[3,{"a":2,"z":1}]}');
  });
});

describe('withImageDigest', () => {
  it('adds the digest to YAML and keeps comments and order', () => {
    const out = withImageDigest(MINIMAL_YAML, 'env.yaml', DIGEST);
    expect(out).toContain('# the smallest useful manifest');
    expect(out).toContain('name: berth # harness kind');
    expect(out).toContain(`digest: ${DIGEST}`);
    expect(out.indexOf('kernel:')).toBeLessThan(out.indexOf('image:'));
    expect(parseEnvironment(out, 'env.yaml').image.digest).toBe(DIGEST);
  });

  it('replaces an existing digest instead of adding a second one', () => {
    const once = withImageDigest(MINIMAL_YAML, 'env.yaml', `sha256:${'0'.repeat(64)}`);
    const twice = withImageDigest(once, 'env.yaml', DIGEST);
    expect(twice.match(/digest:/g)).toHaveLength(1);
    expect(parseEnvironment(twice, 'env.yaml').image.digest).toBe(DIGEST);
  });

  it('rewrites JSON with a 2-space indent and the digest after ref', () => {
    const m = full();
    delete m.image.digest;
    const out = withImageDigest(JSON.stringify(m), 'env.json', DIGEST);
    expect(out).toContain(`"image": {\n    "ref": "berth/tiny:latest",\n    "digest": "${DIGEST}"\n  }`);
  });

  it('refuses something that is not a digest', () => {
    expect(() => withImageDigest(MINIMAL_YAML, 'env.yaml', 'latest')).toThrow(expect.objectContaining({ code: 'manifest_invalid' }));
  });
});

describe('checks beyond the schema', () => {
  it('refuses an allow list with network mode none, naming network.allow', () => {
    const m = full();
    m.network = { mode: 'none', allow: ['api.example.com:443'] } as typeof m.network;
    const env = parseEnvironment(JSON.stringify(m), 'env.json');
    expect(() => checkSupported(env)).toThrow(expect.objectContaining({ code: 'manifest_invalid', message: expect.stringContaining('network.allow has no effect') }));
  });

  it('refuses a name in open mode: the list only opens host addresses; the error names the entry', () => {
    const m = full();
    m.network = { mode: 'open', allow: ['192.0.2.2:8080', 'api.example.com:443'] } as typeof m.network;
    const env = parseEnvironment(JSON.stringify(m), 'env.json');
    expect(() => checkSupported(env)).toThrow(expect.objectContaining({ code: 'manifest_invalid', message: expect.stringMatching(/network\.allow\.1: "api\.example\.com:443"/) }));
  });

  it('accepts none without a list, allowlist with names and open with host addresses', () => {
    expect(() => checkSupported(parseEnvironment(MINIMAL_YAML, 'env.yaml'))).not.toThrow();
    const m = full();
    m.network = { mode: 'allowlist', allow: ['api.example.com:443'] } as typeof m.network;
    expect(() => checkSupported(parseEnvironment(JSON.stringify(m), 'env.json'))).not.toThrow();
    m.network = { mode: 'open', allow: ['192.0.2.2:8080'] } as typeof m.network;
    expect(() => checkSupported(parseEnvironment(JSON.stringify(m), 'env.json'))).not.toThrow();
  });

  it('accepts a root owner and a system workspace path only with their explicit overrides', () => {
    const m = full();
    m.workspace = { path: '/etc/app', owner: '0:0', allowRootOwner: true, allowSystemPath: true } as typeof m.workspace;
    expect(parseEnvironment(JSON.stringify(m), 'env.json').workspace).toMatchObject({ path: '/etc/app', owner: '0:0' });
    m.workspace = { path: '/etcetera', owner: '1000:0' } as typeof m.workspace;
    expect(parseEnvironment(JSON.stringify(m), 'env.json').workspace.path).toBe('/etcetera');
  });

  it('refuses resource maxima the engine cannot give, naming the field, the value and what the engine has', () => {
    const m = full();
    m.resources = { ...m.resources, cpus: 4, memoryMb: 8192 };
    const env = parseEnvironment(JSON.stringify(m), 'env.json');
    let err: unknown;
    try {
      checkEngineCapacity(env, { cpus: 2, memoryBytes: 4 * 1024 ** 3, pidsLimit: false });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'manifest_unsupported' });
    const message = (err as Error).message;
    expect(message).toContain('resources.cpus: 4 CPUs asked, the engine has 2');
    expect(message).toContain('resources.memoryMb: 8192 MB asked, the engine has 4096 MB');
    expect(message).toContain('resources.pids');
    expect(() => checkEngineCapacity(parseEnvironment(MINIMAL_YAML, 'env.yaml'), { cpus: 2, memoryBytes: 4 * 1024 ** 3, pidsLimit: true })).not.toThrow();
  });

  it('refuses an unpinned image and accepts a pinned one', () => {
    expect(() => requireLocked(parseEnvironment(MINIMAL_YAML, 'env.yaml'))).toThrow(expect.objectContaining({ code: 'manifest_unlocked', message: expect.stringContaining('image.digest') }));
    expect(() => requireLocked(parseEnvironment(JSON.stringify(full()), 'env.json'))).not.toThrow();
  });
});

describe('satisfiesRange', () => {
  it.each([
    ['0.1.0', '>=0.1.0 <0.2.0', true],
    ['0.1.9', '>=0.1.0 <0.2.0', true],
    ['0.2.0', '>=0.1.0 <0.2.0', false],
    ['0.0.9', '>=0.1.0 <0.2.0', false],
    ['1.4.2', '^1.2.3', true],
    ['2.0.0', '^1.2.3', false],
    ['0.2.5', '^0.2.3', true],
    ['0.3.0', '^0.2.3', false],
    ['0.0.3', '^0.0.3', true],
    ['0.0.4', '^0.0.3', false],
    ['1.0.0', '=1.0.0', true],
    ['1.0.0', '1.0.0', true],
    ['1.0.1', '1.0.0', false],
    ['1.0.0', '> 0.9.9 <= 1.0.0', true],
    ['1.0.0-rc.1', '<1.0.0', true],
    ['1.0.0-rc.2', '>1.0.0-rc.1', true],
    ['1.0.0-alpha', '<1.0.0-alpha.1', true],
  ] as const)('%s satisfies %s: %s', (version, range, expected) => {
    expect(satisfiesRange(version, range)).toBe(expected);
  });

  it('throws for a range it cannot read rather than answering false', () => {
    expect(() => satisfiesRange('1.0.0', '1.x || 2')).toThrow(TypeError);
    expect(() => satisfiesRange('1.0', '^1.0.0')).toThrow(TypeError);
  });
});

describe('the committed JSON Schema', () => {
  it('equals what the zod schema generates now (run npx tsx environment/write-json-schema.ts)', () => {
    const committed = readFileSync(join(import.meta.dirname, '../..', JSON_SCHEMA_FILE), 'utf8');
    expect(committed).toBe(environmentJsonSchema());
  });

  it('forbids unknown fields in every object', () => {
    const schema = JSON.parse(environmentJsonSchema()) as { additionalProperties: boolean; properties: Record<string, { additionalProperties?: boolean }> };
    expect(schema.additionalProperties).toBe(false);
    for (const key of Object.keys(EnvironmentSchema.shape)) {
      if (key !== 'secrets') expect(schema.properties[key]?.additionalProperties).toBe(false);
    }
  });
});

describe('unknown fields and plan errors', () => {
  it('suggests the field a misspelt name probably meant, and nothing when no name is close', () => {
    const { err, issues } = invalidJson((m) => {
      m.resources.memorymb = 512;
      m.resources.volumes = 1;
    });
    const byPath = new Map(issues.map((i) => [i.path, i]));
    expect(byPath.get('resources.memorymb')?.message).toBe('unknown field resources.memorymb; did you mean `memoryMb`?');
    expect(byPath.get('resources.volumes')?.message).toBe('unknown field resources.volumes');
    expect(err.message).toContain('resources.memorymb: unknown field (found 512); did you mean `memoryMb`?');
  });

  it('a plan that does not match its schema is an invalid plan, not a manifest', async () => {
    const { loadPlan } = await import('../../host/plan');
    const dir = await mkdtemp(join(tmpdir(), 'berth-plan-unit-'));
    await writeFile(join(dir, 'plan.yaml'), 'environment: env.yaml\nsteps:\n  - name: a\n    run: "true"\n    replay: twice\n    timeout: 5\n');
    const err = (await loadPlan(join(dir, 'plan.yaml')).then(() => undefined, (e: unknown) => e)) as BerthError;
    expect(err).toBeInstanceOf(BerthError);
    expect(err.code).toBe('plan_invalid');
    expect(err.message).toContain('invalid plan');
    expect(err.message).not.toMatch(/manifest/);
    expect(err.message).toContain('did you mean `timeoutS`?');
  });

  it('says how to quote a YAML scalar read as a boolean, a number or null where text was expected (run: true is not the command true)', async () => {
    const { loadPlan } = await import('../../host/plan');
    const dir = await mkdtemp(join(tmpdir(), 'berth-plan-yaml-'));
    await writeFile(join(dir, 'plan.yaml'), 'environment: env.yaml\nsteps:\n  - name: a\n    run: true\n  - name: 1.10\n    run: "make"\n  - name: c\n    run:\n');
    const err = (await loadPlan(join(dir, 'plan.yaml')).then(() => undefined, (e: unknown) => e)) as BerthError;
    expect(err).toBeInstanceOf(BerthError);
    // Before: "expected a value of type string, found true", with no word on why a command is not text.
    expect(err.message).toContain('steps.0.run: expected a value of type string, found true; YAML reads an unquoted true as a boolean: quote it ("true") to keep it text');
    expect(err.message).toContain('steps.1.name: expected a value of type string, found 1.1; YAML reads an unquoted 1.1 as a number: quote it ("1.1") to keep it text');
    expect(err.message).toContain('steps.2.run: expected a value of type string, found null; an empty value is null in YAML');
    const issues = (err.details as { issues: Array<{ path: string; hint?: string }> }).issues;
    expect(issues.find((i) => i.path === 'steps.0.run')?.hint).toMatch(/^YAML reads/);
    // A wrong type that is not a YAML scalar gets no hint.
    await writeFile(join(dir, 'plan.yaml'), 'environment: env.yaml\nsteps:\n  - name: a\n    run: [make]\n');
    const list = (await loadPlan(join(dir, 'plan.yaml')).then(() => undefined, (e: unknown) => e)) as BerthError;
    expect(list.message.split('\n')).toContain('  steps.0.run: expected a value of type string, found ["make"]');
  });

  it('names a refused artifact glob once, with why it is refused', async () => {
    const { loadPlan } = await import('../../host/plan');
    const dir = await mkdtemp(join(tmpdir(), 'berth-plan-glob-'));
    await writeFile(join(dir, 'plan.yaml'), 'environment: env.yaml\nsteps:\n  - name: a\n    run: "true"\n    artifacts: ["../../etc/passwd", "/etc/shadow", "ok/**"]\n');
    const err = (await loadPlan(join(dir, 'plan.yaml')).then(() => undefined, (e: unknown) => e)) as BerthError;
    // Before: 'expected a relative glob inside the workspace (found "../../etc/passwd", which has ...), found "../../etc/passwd"'.
    expect(err.message.split('\n').slice(1)).toEqual([
      '  steps.0.artifacts.0: expected a relative glob inside the workspace (this one has a ".." component), found "../../etc/passwd"',
      '  steps.0.artifacts.1: expected a relative glob inside the workspace (this one has an absolute path), found "/etc/shadow"',
    ]);
  });

  it('a plan path that is a directory is plan_unreadable naming it (it was an internal EISDIR error), a missing one plan_not_found', async () => {
    const { loadPlan } = await import('../../host/plan');
    const dir = await mkdtemp(join(tmpdir(), 'berth-plan-dir-'));
    await expect(loadPlan(dir)).rejects.toMatchObject({ code: 'plan_unreadable', message: `cannot read plan ${dir}: it is a directory, not a file` });
    await expect(loadPlan(join(dir, 'none.yaml'))).rejects.toMatchObject({ code: 'plan_not_found', message: `plan ${join(dir, 'none.yaml')} does not exist` });
  });
});
