import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EnvironmentSchema, type Environment } from '../../environment';
import { ENTRY, submitAgentRun, type ToolResultEntry } from '../../host/agent';
import { agentWorld, tinyEnvironment, type AgentWorld } from '../support/agent-fixture';
import { containerStdout } from '../support/agent-observe';
import { startModelServer, type ScriptedTurn } from '../support/model-server';
import { planFixture } from '../support/plan-fixture';
import { expectNoLeaks, saveImage, storeFiles, type Scanned } from '../support/secret-scan';

// Long and random-looking, so a match in any scanned byte stream can only be a leak.
const TOKEN = `tok-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}-agent`;
const KEY = `key-${Math.random().toString(36).slice(2)}-agent-file-secret`;
const sha = (v: string) => createHash('sha256').update(`${v}\n`).digest('hex');
const TOOLS = 'exec, read_file, list_files, search, write_file, edit, snapshot';

// The command checks the values by hash: it is sent by the model and committed, so it must not hold them.
const USE =
  'echo "token=$TOKEN"; echo "$TOKEN" | busybox base64; cat "$DEPLOY_KEY_FILE" >&2; ' +
  `test "$(echo "$TOKEN" | sha256sum | cut -c1-64)" = "${sha(TOKEN)}" && test "$(echo "$(cat "$DEPLOY_KEY_FILE")" | sha256sum | cut -c1-64)" = "${sha(KEY)}"`;

const secretsYaml = (to: string, keyFile: string, tokenVar = 'BERTH_AGENT_TEST_TOKEN') => `secrets:
  - { name: TOKEN, from: { env: ${tokenVar} }, expose: env, to: [${to}] }
  - { name: DEPLOY_KEY, from: { file: ${JSON.stringify(keyFile)} }, expose: file, to: [exec] }
`;

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => {});
  cleanup = [];
});

/** `berth agent` against a plan fixture's env and workspace, with the scripted model behind it. */
async function cliAgent(script: ScriptedTurn[], to = 'exec') {
  const fx = await planFixture([]);
  const model = await startModelServer(script);
  cleanup.push(() => fx.cleanup(), () => model.close());
  const envFile = join(fx.dir, 'env.yaml');
  writeFileSync(`${fx.dir}/deploy.key`, `${KEY}\n`);
  writeFileSync(envFile, readFileSync(envFile, 'utf8') + secretsYaml(to, `${fx.dir}/deploy.key`));
  const agent = (task: string, env: Record<string, string>) =>
    fx.cli(['agent', task, '--env', envFile, '--workspace', join(fx.dir, 'ws'), '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY'], { TEST_MODEL_KEY: 'sk-test', ...env });
  return { fx, model, agent };
}

/** An agent world whose environment declares `secrets` (snapshot policy `never`). */
async function secretWorld(script: Parameters<typeof agentWorld>[0], secrets: unknown[]) {
  const w = await agentWorld(script);
  cleanup.push(() => w.cleanup());
  const environment = EnvironmentSchema.parse({ ...tinyEnvironment(w.imageId), secrets }) as Environment & { image: { digest: string } };
  const start = (message: string) => submitAgentRun({ ...w.rt, toolNames: [...w.rt.agent.tools.keys()] }, { message, settings: w.settings(), environment });
  return { w, start };
}

const results = async (w: AgentWorld, sessionId: string) =>
  (await w.rt.store.listEntries(sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
const byId = async (w: AgentWorld, sessionId: string) => new Map((await results(w, sessionId)).map((r) => [r.toolCallId, r]));
const liveText = (w: AgentWorld, toolCallId: string, stream: 'stdout' | 'stderr') =>
  w.live.flatMap((e) => (e.type === 'tool-output' && e.toolCallId === toolCallId && e.stream === stream ? [e.text] : [])).join('');

describe('secrets given to agent tools', { timeout: 180_000 }, () => {
  it('an exec tool call granted a secret uses it; the store file, the CLI output/logs, the committed entries, the requests sent to the model and `docker save` of the snapshot images hold neither the value nor its base64', async () => {
    const { fx, model, agent } = await cliAgent([
      { toolCalls: [{ name: 'exec', arguments: { command: USE } }] },
      { toolCalls: [{ name: 'list_files', arguments: { path: '.', recursive: true } }] },
      { content: 'Deployed.' },
    ]);
    const end = await agent('deploy with the token', { BERTH_AGENT_TEST_TOKEN: TOKEN, BERTH_LOG_LEVEL: 'debug' });
    expect(end.code, end.stderr).toBe(0);
    expect(end.stderr).toContain('token=[redacted:TOKEN]');
    expect(end.stderr).toContain('[redacted:DEPLOY_KEY]');

    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const shown = await fx.cli(['show', runId, '--json']);
    const { entries, snapshots, effects } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      return { entries: await s.listEntries(run.sessionId), snapshots: await s.listSnapshots({ runId }), effects: await s.listEffects({ runId }) };
    });
    const calls = new Map(entries.filter((e) => e.kind === ENTRY.toolResult).map((e) => [(e.body as unknown as ToolResultEntry).toolCallId, e.body as unknown as ToolResultEntry]));
    // Exit 0: the hashes matched, so the command had the real values; it shows only markers.
    expect(calls.get('call_0_0')).toMatchObject({ status: 'ok', isError: false, content: 'exit code 0\n--- stdout ---\ntoken=[redacted:TOKEN]\n[redacted:TOKEN]\n--- stderr ---\n[redacted:DEPLOY_KEY]' });
    expect(calls.get('call_1_0')).toMatchObject({ status: 'ok' });
    expect(effects.map((e) => [e.kind, e.status])).toEqual([['tool.exec', 'confirmed'], ['tool.list_files', 'confirmed']]);
    // The model was told the names, never given the values.
    const exec = (model.requests[0]!.body.tools as Array<{ function: { name: string; description: string } }>).find((t) => t.function.name === 'exec')!;
    expect(exec.function.description).toContain('$TOKEN (environment variable), $DEPLOY_KEY_FILE');
    expect(JSON.stringify(model.requests[1]!.body.messages)).toContain('token=[redacted:TOKEN]');

    const containers = await fx.docker.listContainers({ all: true, filters: { label: [`berth.host=${fx.hostId}`] } });
    expect(containers.length).toBeGreaterThanOrEqual(1);
    // The tmpfs file was removed after that exec (the directory may stay, empty). Looked at from
    // outside the tools: list_files, like every tool but exec, sees only the workspace.
    const leased = containers.filter((c) => c.State === 'running');
    expect(leased.length).toBeGreaterThanOrEqual(1);
    for (const c of leased) expect(await containerStdout(fx.docker, c.Id, ['find', '/dev/shm', '-path', '*berth-secrets/*'])).toBe('');
    const scanned: Scanned = [
      ['stdout', Buffer.from(end.stdout)],
      ['stderr', Buffer.from(end.stderr)],
      ['show', Buffer.from(shown.stdout + shown.stderr)],
      ['entries', Buffer.from(JSON.stringify(entries))],
      ['effects', Buffer.from(JSON.stringify(effects))],
      ['model requests', Buffer.from(JSON.stringify(model.requests))],
      ...storeFiles(fx.store),
    ];
    for (const c of containers) scanned.push([`inspect ${c.Id}`, Buffer.from(JSON.stringify(await fx.docker.getContainer(c.Id).inspect()))]);
    expect(snapshots.length).toBeGreaterThanOrEqual(2);
    for (const snap of snapshots) scanned.push([`image ${snap.id}`, await saveImage(fx.docker, `berth-snapshot:${snap.id}`)]);
    expectNoLeaks(scanned, [TOKEN, KEY]);
  });

  it('a tool call that leaves its secret in a file outside the workspace, in hex, gets its snapshot refused naming the file; no image holds the value', async () => {
    const { fx, agent } = await cliAgent([
      { toolCalls: [{ name: 'exec', arguments: { command: 'printf %s "$TOKEN" | od -An -v -tx1 | tr -d " \\n" > /tmp/t.hex; echo wrote' } }] },
      { content: 'done' },
    ]);
    const end = await agent('stash the token', { BERTH_AGENT_TEST_TOKEN: TOKEN });
    expect(end.stderr).toContain('wrote');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { tasks, snapshots } = await fx.read(async (s) => ({ tasks: await s.listTasks({ runId }), snapshots: await s.listSnapshots({ runId }) }));
    const refused = tasks.find((t) => t.error?.code === 'snapshot_holds_secret');
    expect(refused?.error?.message).toContain('/tmp/t.hex (TOKEN, in its content)');
    expect(snapshots.map((s) => s.checkpoint)).toEqual(['agent:start']);
    const scanned: Scanned = [['output', Buffer.from(end.stdout + end.stderr)], ...storeFiles(fx.store)];
    for (const img of await fx.docker.listImages({ filters: { label: [`berth.host=${fx.hostId}`] } })) scanned.push([`image ${img.Id}`, await saveImage(fx.docker, img.Id)]);
    expectNoLeaks(scanned, [TOKEN, KEY]);
  });

  it('a tool not granted the secret does not see it: not in its environment, not under /dev/shm, not in the container configuration', async () => {
    process.env.BERTH_AGENT_TEST_TOKEN_B = TOKEN;
    cleanup.push(async () => void delete process.env.BERTH_AGENT_TEST_TOKEN_B);
    const { w, start } = await secretWorld(
      [
        {
          toolCalls: [
            { name: 'exec', arguments: { command: 'echo "token=${TOKEN:-unset} file=${DEPLOY_KEY_FILE:-unset}"; ls -A /dev/berth 2>/dev/null | wc -l' } },
            { name: 'search', arguments: { pattern: '.', path: '/dev/berth' } },
          ],
        },
        { content: 'done' },
      ],
      [
        { name: 'TOKEN', from: { env: 'BERTH_AGENT_TEST_TOKEN_B' }, expose: 'env', to: ['search'] },
        { name: 'DEPLOY_KEY', from: { file: keyFile() }, expose: 'file', to: ['search'] },
      ],
    );
    const { run } = await start('look around');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const r = await byId(w, run.sessionId);
    expect(r.get('call_0_0')!.content).toBe('exit code 0\n--- stdout ---\ntoken=unset file=unset\n0');
    // Even the tool granted the file cannot list the secret directory: search sees only the workspace
    // (a process that tries, with exec, is refused by the directory's mode: sandbox-processes.test.ts).
    expect(r.get('call_0_1')!.content).toMatch(/^error: path "\/dev\/berth" leaves the workspace \/\S+$/);
    const tools = w.model.requests[0]!.body.tools as Array<{ function: { name: string; description: string } }>;
    expect(tools.find((t) => t.function.name === 'search')!.function.description).toContain('$TOKEN (environment variable), $DEPLOY_KEY_FILE');
    expect(tools.find((t) => t.function.name === 'exec')!.function.description).not.toContain('Secrets');
    const [c] = await w.docker.listContainers({ all: true, filters: { label: [`berth.host=${w.hostId}`] } });
    expectNoLeaks([['inspect', Buffer.from(JSON.stringify(await w.docker.getContainer(c!.Id).inspect()))]], [TOKEN, KEY]);
  });

  it('a value a granted command writes into the workspace comes back scrubbed from read_file and search, and live output catches a value split across chunks', async () => {
    process.env.BERTH_AGENT_TEST_TOKEN_C = TOKEN;
    cleanup.push(async () => void delete process.env.BERTH_AGENT_TEST_TOKEN_C);
    const split = `printf '%s' "$TOKEN" > leak.txt; printf 'live:%s' "$(echo "$TOKEN" | cut -c1-10)"; sleep 0.5; echo "$TOKEN" | cut -c11-`;
    const { w, start } = await secretWorld(
      [
        { toolCalls: [{ name: 'exec', arguments: { command: split } }] },
        { toolCalls: [{ name: 'read_file', arguments: { path: 'leak.txt' } }, { name: 'search', arguments: { pattern: TOKEN.slice(0, 4), fixed: true } }] },
        { content: 'done' },
      ],
      [{ name: 'TOKEN', from: { env: 'BERTH_AGENT_TEST_TOKEN_C' }, expose: 'env', to: ['exec'] }],
    );
    const { run } = await start('leak it');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const r = await byId(w, run.sessionId);
    expect(r.get('call_0_0')!.content).toBe('exit code 0\n--- stdout ---\nlive:[redacted:TOKEN]');
    expect(liveText(w, 'call_0_0', 'stdout')).toBe('live:[redacted:TOKEN]\n');
    expect(r.get('call_1_0')!.content).toBe('[redacted:TOKEN]');
    expect(r.get('call_1_1')!.content).toBe('leak.txt:1:[redacted:TOKEN]');
    const entries = await w.rt.store.listEntries(run.sessionId);
    const effects = await w.rt.store.listEffects({ runId: run.id });
    expectNoLeaks(
      [
        ['entries', Buffer.from(JSON.stringify(entries))],
        ['effects', Buffer.from(JSON.stringify(effects))],
        ['live', Buffer.from(JSON.stringify(w.live))],
        ['model requests', Buffer.from(JSON.stringify(w.model.requests))],
        ...storeFiles(w.storePath),
      ],
      [TOKEN],
    );
  });

  it('output longer than the output cap keeps no part of a value the cap would cut through', async () => {
    process.env.BERTH_AGENT_TEST_TOKEN_D = TOKEN;
    cleanup.push(async () => void delete process.env.BERTH_AGENT_TEST_TOKEN_D);
    // The sandbox keeps the first 32 KiB: the value starts 8 characters before that cut.
    const long = `head -c 32760 /dev/zero | tr '\\0' x; printf '%s' "$TOKEN"; head -c 70000 /dev/zero | tr '\\0' y`;
    const { w, start } = await secretWorld(
      [{ toolCalls: [{ name: 'exec', arguments: { command: long } }] }, { content: 'done' }],
      [{ name: 'TOKEN', from: { env: 'BERTH_AGENT_TEST_TOKEN_D' }, expose: 'env', to: ['exec'] }],
    );
    const { run } = await start('print a lot');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const out = (await byId(w, run.sessionId)).get('call_0_0')!;
    expect(out.detail).toMatchObject({ truncated: true });
    // The head ends inside the marker that replaced the value, never inside the value.
    expect(out.content).toMatch(/x{100}\[redacte\n\[\.\.\. \d+ characters truncated \.\.\.\]\n/);
    expect(out.content).not.toContain(TOKEN.slice(0, 5));
    expectNoLeaks([['entries', Buffer.from(JSON.stringify(await w.rt.store.listEntries(run.sessionId)))], ...storeFiles(w.storePath)], [TOKEN]);
  });

  it('a tool call whose secret cannot be read on the host gets an error result naming the secret and its source, and nothing runs, granted or not', async () => {
    process.env.BERTH_AGENT_TEST_TOKEN_E = TOKEN;
    cleanup.push(async () => void delete process.env.BERTH_AGENT_TEST_TOKEN_E);
    const { w, start } = await secretWorld(
      (turn) => {
        // The variable disappears after the run was accepted, before its first tool call.
        if (turn === 0) delete process.env.BERTH_AGENT_TEST_TOKEN_E;
        return turn === 0
          ? { toolCalls: [{ name: 'exec', arguments: { command: 'touch ran.txt' } }, { name: 'read_file', arguments: { path: 'ran.txt' } }] }
          : { content: 'I cannot run tools without the token.' };
      },
      [{ name: 'TOKEN', from: { env: 'BERTH_AGENT_TEST_TOKEN_E' }, expose: 'env', to: ['exec'] }],
    );
    const { run } = await start('try');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const text = 'error: secret TOKEN: host environment variable BERTH_AGENT_TEST_TOKEN_E is not set; the call did not run';
    const r = await byId(w, run.sessionId);
    expect(r.get('call_0_0')).toMatchObject({ status: 'error', isError: true, content: text, detail: { code: 'secret_unavailable' } });
    expect(r.get('call_0_1')).toMatchObject({ status: 'error', isError: true, content: text });
    expect((await w.rt.store.listEffects({ runId: run.id })).map((e) => [e.kind, e.status])).toEqual([['tool.exec', 'failed'], ['tool.read_file', 'failed']]);
    expect(JSON.stringify(w.model.requests[1]!.body.messages)).toContain('host environment variable BERTH_AGENT_TEST_TOKEN_E is not set');
  });

  it('berth agent refuses, before submitting anything, a secret given to a name that is not a tool and a secret whose host variable is not set', async () => {
    const { fx, agent } = await cliAgent([{ content: 'never asked' }], 'exec, deploy');
    const typo = await agent('deploy', { BERTH_AGENT_TEST_TOKEN: TOKEN });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain(`secrets.0.to.1: expected the name of a tool (${TOOLS}), found "deploy"`);
    writeFileSync(join(fx.dir, 'env.yaml'), readFileSync(join(fx.dir, 'env.yaml'), 'utf8').replace('to: [exec, deploy]', 'to: [exec]'));
    const unset = await agent('deploy', { BERTH_AGENT_TEST_TOKEN: '' });
    expect(unset.code).toBe(1);
    expect(unset.stderr).toContain('berth: secret_unavailable: secret TOKEN: host environment variable BERTH_AGENT_TEST_TOKEN is not set');
    expect(await fx.read((s) => s.listRuns())).toEqual([]);
  });
});

/** The deploy key in a host file of its own. */
function keyFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-secret-'));
  cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'deploy.key'), `${KEY}\n`);
  return join(dir, 'deploy.key');
}
