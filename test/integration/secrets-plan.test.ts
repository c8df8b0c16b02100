import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { expectNoLeaks, saveImage, storeFiles, type Scanned } from '../support/secret-scan';

// Long and random-looking, so a match in any scanned byte stream can only be a leak.
const TOKEN = `tok-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}-berth`;
const KEY = `key-${Math.random().toString(36).slice(2)}-file-secret`;

const SECRETS_YAML = `secrets:
  - { name: TOKEN, from: { env: BERTH_TEST_TOKEN }, expose: env, to: [use] }
  - { name: DEPLOY_KEY, from: { file: KEYFILE }, expose: file, to: [use] }
`;

const sha = (v: string) => createHash('sha256').update(`${v}\n`).digest('hex');

// The step checks the values by hash: the plan is copied into the store, so it must not hold them.
const USE =
  'echo "token=$TOKEN"; echo "$TOKEN" | busybox base64; cat "$DEPLOY_KEY_FILE" >&2; ' +
  `test "$(echo "$TOKEN" | sha256sum | cut -c1-64)" = "${sha(TOKEN)}" && test "$(echo "$(cat "$DEPLOY_KEY_FILE")" | sha256sum | cut -c1-64)" = "${sha(KEY)}"`;
// A later step sees neither: not in its environment, and the tmpfs file is gone.
const AFTER = 'test -z "$TOKEN" && test -z "$DEPLOY_KEY_FILE" && test -z "$(ls -A /dev/shm/berth-secrets 2>/dev/null)" && echo clean';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

async function secretsFixture(useSecrets: string[]) {
  fx = await planFixture([]);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, readFileSync(envFile, 'utf8') + SECRETS_YAML.replace('KEYFILE', `${fx.dir}/deploy.key`));
  writeFileSync(`${fx.dir}/deploy.key`, `${KEY}\n`);
  const plan = `name: secrets\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: use\n    run: ${JSON.stringify(USE)}\n    secrets: [${useSecrets.join(', ')}]\n  - name: after\n    run: ${JSON.stringify(AFTER)}\n`;
  writeFileSync(fx.plan, plan);
  expect(plan).not.toContain(TOKEN);
  return fx;
}

describe('secrets given to plan steps never persist', { timeout: 180_000 }, () => {
  it('a step uses its secrets; the store, logs, entries and snapshot images hold neither value nor base64', async () => {
    const fx = await secretsFixture(['TOKEN', 'DEPLOY_KEY']);
    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_TOKEN: TOKEN, BERTH_LOG_LEVEL: 'debug' });
    expect(end.code, end.stderr).toBe(0);
    expect(end.stderr).toContain('token=[redacted:TOKEN]');
    expect(end.stderr).toContain('[redacted:DEPLOY_KEY]');
    expect(end.stderr).toContain('clean');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const shown = await fx.cli(['show', runId, '--json']);
    // The run record (berth export) names the secrets and their grants, never a value (issue 17).
    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as { isolation: { secrets: unknown } };
    expect(record.isolation.secrets).toEqual([{ name: 'TOKEN', to: ['use'] }, { name: 'DEPLOY_KEY', to: ['use'] }]);

    const { entries, snapshots } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      return { entries: await s.listEntries(run.sessionId), snapshots: await s.listSnapshots({ runId }) };
    });
    const body = entries.find((e) => e.kind === 'plan.step.output' && (e.body as { step: string }).step === 'use')!.body as { stdoutTail: string; stderrTail: string };
    expect(body.stdoutTail).toBe('token=[redacted:TOKEN]\n[redacted:TOKEN]\n');
    expect(body.stderrTail).toBe('[redacted:DEPLOY_KEY]');

    const scanned: Scanned = [
      ['stdout', Buffer.from(end.stdout)],
      ['stderr', Buffer.from(end.stderr)],
      ['show', Buffer.from(shown.stdout + shown.stderr)],
      ['export', Buffer.from(exported.stdout + exported.stderr)],
      ['entries', Buffer.from(JSON.stringify(entries))],
    ];
    scanned.push(...storeFiles(fx.store));
    expect(snapshots.length).toBeGreaterThanOrEqual(3);
    for (const snap of snapshots) scanned.push([`image ${snap.id}`, await saveImage(fx.docker, `berth-snapshot:${snap.id}`)]);
    expectNoLeaks(scanned, [TOKEN, KEY]);
  });

  it('a value granted to one step and printed by a later one in every encoding is scrubbed everywhere; the step that writes it to a file gets its snapshot refused', async () => {
    fx = await planFixture([]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, readFileSync(envFile, 'utf8') + 'secrets:\n  - { name: TOKEN, from: { env: BERTH_TEST_TOKEN }, expose: env, to: [stash] }\n');
    // /dev/shm is the container's tmpfs: never in a layer, so the snapshots after these steps stay clean.
    const stash = 'umask 077; printf %s "$TOKEN" > /dev/shm/stash; echo stashed';
    const hex = 'od -An -v -tx1 | tr -d " \\n"';
    const print = [
      'V=$(cat /dev/shm/stash)',
      'echo "raw=$V"',
      'printf %s "$V" | busybox base64',
      'printf a%s "$V" | busybox base64',
      'printf ab%s "$V" | busybox base64 >&2',
      'printf ab%s "$V" | busybox base64 | tr "+/" "-_"',
      `printf %s "$V" | ${hex}; echo`,
      `printf %s "$V" | ${hex} | tr a-f A-F; echo`,
      // Split across two writes a second apart: two chunks of output.
      'printf "split=%s" "${V:0:9}"; sleep 1; printf "%s\\n" "${V:9}"',
    ].join('; ');
    const leak = `cp /dev/shm/stash leaked.txt; printf %s "$(cat /dev/shm/stash)" | ${hex} > /tmp/hex.txt`;
    const steps = [['stash', stash], ['print', print], ['leak', leak], ['after', 'echo after-ran']];
    writeFileSync(fx.plan, `name: leak\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map(([n, r]) => `  - name: ${n}\n    run: ${JSON.stringify(r)}\n${n === 'stash' ? '    secrets: [TOKEN]\n' : ''}`).join('')}`);

    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_TOKEN: TOKEN, BERTH_LOG_LEVEL: 'debug' });
    expect(end.code, end.stderr).toBe(1);
    expect(end.stderr).toContain('raw=[redacted:TOKEN]');
    expect(end.stderr).toContain('split=[redacted:TOKEN]');
    expect(end.stderr).not.toContain('after-ran');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { tasks, entries, snapshots } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      return { tasks: await s.listTasks({ runId }), entries: await s.listEntries(run.sessionId), snapshots: await s.listSnapshots({ runId }) };
    });
    const printed = entries.find((e) => e.kind === 'plan.step.output' && (e.body as { step: string }).step === 'print')!.body as { stdoutTail: string; stderrTail: string };
    expect(printed.stdoutTail.match(/\[redacted:TOKEN\]/g)).toHaveLength(7);
    expect(printed.stderrTail).toContain('[redacted:TOKEN]');
    // The step that wrote the value to files: typed refusal naming both files, no snapshot of that state.
    const leakTask = tasks.find((t) => t.kind === 'plan-step' && (t.input as { index: number }).index === 2)!;
    expect(leakTask.error?.code).toBe('snapshot_holds_secret');
    expect(leakTask.error?.message).toContain('/workspace/leaked.txt');
    expect(leakTask.error?.message).toContain('/tmp/hex.txt');
    expect(snapshots.map((s) => s.checkpoint)).toEqual(['upload', 'step:0:stash', 'step:1:print']);
    expect(tasks.filter((t) => t.kind === 'plan-step')).toHaveLength(3);

    const logs = await fx.cli(['logs', runId]);
    const logsJson = await fx.cli(['logs', runId, '--json']);
    const shown = await fx.cli(['show', runId, '--json']);
    const scanned: Scanned = [
      ['run output', Buffer.from(end.stdout + end.stderr)],
      ['logs', Buffer.from(logs.stdout + logs.stderr)],
      ['logs --json', Buffer.from(logsJson.stdout)],
      ['show --json', Buffer.from(shown.stdout + shown.stderr)],
      ...storeFiles(fx.store),
    ];
    const images = (await fx.docker.listImages({ filters: { label: [`berth.host=${fx.hostId}`] } })).map((i) => i.Id);
    for (const id of images) scanned.push([`image ${id}`, await saveImage(fx.docker, id)]);
    // Every snapshot's image is among those scanned (a step that changed nothing shares its predecessor's image).
    expect(images).toEqual(expect.arrayContaining([...new Set(snapshots.map((s) => s.imageId))]));
    expectNoLeaks(scanned, [TOKEN]);
  });

  it('with allowInWorkspace the snapshot keeps the value and its image is labelled as secret material; a changed file the check cannot read is refused', async () => {
    fx = await planFixture([]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, readFileSync(envFile, 'utf8') + 'secrets:\n  - { name: TOKEN, from: { env: BERTH_TEST_TOKEN }, expose: env, to: [keep], allowInWorkspace: true }\n');
    const steps = [
      ['keep', 'printf %s "$TOKEN" > kept.txt'],
      ['hide', 'mkdir hidden && echo plain > hidden/x && chmod 000 hidden'],
    ];
    writeFileSync(fx.plan, `name: keep\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map(([n, r]) => `  - name: ${n}\n    run: ${JSON.stringify(r)}\n${n === 'keep' ? '    secrets: [TOKEN]\n' : ''}`).join('')}`);
    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_TOKEN: TOKEN });
    expect(end.code, end.stderr).toBe(1);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { tasks, snapshots } = await fx.read(async (s) => ({ tasks: await s.listTasks({ runId }), snapshots: await s.listSnapshots({ runId }) }));
    const kept = snapshots.find((s) => s.checkpoint === 'step:0:keep')!;
    const labels = (await fx.docker.getImage(kept.imageId).inspect()).Config.Labels;
    expect(labels['berth.secret-material']).toBe('TOKEN');
    const upload = snapshots.find((s) => s.checkpoint === 'upload')!;
    expect((await fx.docker.getImage(upload.imageId).inspect()).Config.Labels['berth.secret-material']).toBeUndefined();
    const hide = tasks.find((t) => t.kind === 'plan-step' && (t.input as { index: number }).index === 1)!;
    expect(hide.error?.code).toBe('snapshot_holds_secret');
    expect(hide.error?.message).toContain('/workspace/hidden/x (unreadable, so not checked)');
    expect(snapshots).toHaveLength(2);
  });

  it('fails the step with an error naming the secret when its host variable is missing', async () => {
    const fx = await secretsFixture(['TOKEN']);
    const end = await fx.cli(['run', fx.plan, '--json'], { BERTH_TEST_TOKEN: '' });
    expect(end.code).not.toBe(0);
    expect(end.stdout + end.stderr).toContain('secret TOKEN: host environment variable BERTH_TEST_TOKEN is not set');
  });
});
