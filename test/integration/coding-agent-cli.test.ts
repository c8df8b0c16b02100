import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CODEX_PACKAGE } from '../../sandbox-images/codex/definition';
import { startModelServer, type ModelServer, type ScriptedTurn } from '../support/model-server';
import { lastJson, planFixture } from '../support/plan-fixture';
import { expectNoLeaks, expectNoLeaksInImages, type Scanned } from '../support/secret-scan';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  await fx?.cleanup();
  fx = undefined;
  server = undefined;
}, 240_000);

const KEY = `sk-cli-${randomBytes(18).toString('hex')}`;
const MODEL = 'scripted-coder';

/**
 * What the scripted model tells the CLI to do, in its own tools: dump every process's command line
 * and environment while the CLI runs (the CLI's own included) into a workspace file, edit the file
 * with the CLI's `apply_patch`, check the edit, and say it is done.
 */
const PATCH = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello, world\n+goodbye, world\n*** End Patch\nEOF\n";
const DUMP = 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; tr "\\0" "\\n" < $p/environ; echo; done > environ.dump 2>/dev/null; grep -c "^OPENAI_API_KEY=" environ.dump';
const SCRIPT: ScriptedTurn[] = [
  { content: 'Looking around first.', toolCalls: [{ name: 'exec_command', arguments: { cmd: DUMP } }] },
  { toolCalls: [{ name: 'exec_command', arguments: { cmd: PATCH } }] },
  { toolCalls: [{ name: 'exec_command', arguments: { cmd: 'grep -qx "goodbye, world" greeting.txt && echo CHECK-PASSED' } }] },
  { content: 'Changed the greeting in greeting.txt.' },
];

/**
 * The step: the CLI as its users configure it for an OpenAI-compatible endpoint, a provider entry
 * whose base URL is the sandbox's gateway (`$OPENAI_BASE_URL`) and whose key is the sandbox's
 * placeholder (`OPENAI_API_KEY`); it runs its own commands unsandboxed, the sandbox being Berth's.
 */
const provider = `model_providers.gw={name="gateway",base_url="$OPENAI_BASE_URL",env_key="OPENAI_API_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0}`;
const CODEX = `codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -m ${MODEL} -c model_provider=gw -c "${provider.replace(/"/g, '\\"')}" "Change the greeting in greeting.txt to goodbye" </dev/null`;

type Fixture = NonNullable<typeof fx>;

async function codexImage(f: Fixture): Promise<string> {
  const image = await f.docker
    .getImage('berth/codex:latest')
    .inspect()
    .catch(() => {
      throw new Error('image berth/codex:latest is missing on this engine; build it with `npm run images -- codex`');
    });
  return image.Id;
}

/** The plan: the berth/codex image, allowlist network with nothing allowed, the gateway to the scripted provider with a token budget. */
function writeCodexPlan(f: Fixture, imageId: string, providerUrl: string, budgetTokens: number, steps: Array<[name: string, run: string]>): void {
  writeFileSync(
    join(f.dir, 'env.yaml'),
    [
      'kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }',
      `image: { ref: "berth/codex:latest", digest: "${imageId}" }`,
      'resources: { memoryMb: 1024, commandTimeoutS: 300 }',
      'lease: { ttlS: 600, heartbeatS: 10 }',
      'network: { mode: allowlist, allow: [] }',
      'gateway:',
      `  provider: { baseUrl: "${providerUrl}", key: { env: BERTH_TEST_GATEWAY_KEY } }`,
      `  models: [${MODEL}]`,
      `  budget: { tokens: ${budgetTokens} }`,
    ].join('\n'),
  );
  writeFileSync(join(f.dir, 'plan.yaml'), `name: coding-agent\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map(([n, r]) => `  - name: ${n}\n    run: ${JSON.stringify(r)}\n    replay: never\n`).join('')}`);
}

async function runRecord(f: Fixture, runId: string) {
  return f.read(async (s) => {
    const run = (await s.getRun(runId))!;
    const entries = await s.listEntries(run.sessionId, { runId });
    const outputs: Record<string, string> = {};
    for (const e of entries) if (e.kind === 'plan.step.output') outputs[(e.body as { step: string }).step] = (e.body as { stdoutTail: string; stderrTail?: string }).stdoutTail + ((e.body as { stderrTail?: string }).stderrTail ?? '');
    return { run, outputs, entries, snapshots: await s.listSnapshots({ runId }) };
  });
}

function filesUnder(dir: string): Scanned {
  const out: Scanned = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push([p, readFileSync(p)]);
  }
  return out;
}

describe('a coding-agent CLI from npm in a sandbox', { timeout: 480_000 }, () => {
  it(`runs ${CODEX_PACKAGE} as a plan step through the model gateway: it edits a file, the provider key appears nowhere in the sandbox, its snapshots, the store or the logs, and its usage is in berth cost`, async () => {
    server = await startModelServer(SCRIPT);
    fx = await planFixture([], { 'greeting.txt': 'hello, world\n' });
    const image = await fx.docker.getImage(await codexImage(fx)).inspect();
    writeCodexPlan(fx, image.Id, server.url, 100_000, [
      ['agent', CODEX],
      ['result', 'cat greeting.txt; grep -c "codex exec" environ.dump; grep -E "^OPENAI_(API_KEY|BASE_URL)=" environ.dump | sort -u'],
    ]);

    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_GATEWAY_KEY: KEY, BERTH_LOG_LEVEL: 'debug' });
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { outputs, entries, snapshots } = await runRecord(fx, runId);

    // The CLI did the task with its own tools, each answered through the gateway.
    expect(outputs.agent).toContain('Changed the greeting in greeting.txt.');
    expect(server.requests.map((r) => r.turn)).toEqual([0, 1, 2, 3]);
    const toolResults = server.requests[3]!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
    expect(toolResults[1]).toContain('Updated the following files');
    expect(toolResults[2]).toContain('CHECK-PASSED');
    // The edit is in the workspace; the dump was taken while the CLI ran, so its environment is in it.
    const [greeting, codexProcesses, ...env] = outputs.result!.trim().split('\n');
    expect(greeting).toBe('goodbye, world');
    expect(Number(codexProcesses)).toBeGreaterThanOrEqual(1);
    expect(env).toEqual(['OPENAI_API_KEY=berth-gateway', expect.stringMatching(/^OPENAI_BASE_URL=http:\/\/[\d.]+:3128\/v1$/)]);

    // The provider saw the real key on every request; the record has each exchange with its usage.
    expect(server.requests.map((r) => r.authorization)).toEqual(server.requests.map(() => `Bearer ${KEY}`));
    expect(entries.filter((e) => e.kind === 'gateway.request').map((e) => (e.body as { path: string }).path)).toEqual(['/v1/responses', '/v1/responses', '/v1/responses', '/v1/responses']);
    const responses = entries.filter((e) => e.kind === 'gateway.response').map((e) => e.body as { status: number; usage: { prompt: number; completion: number } });
    expect(responses.map((r) => [r.status, r.usage.prompt, r.usage.completion])).toEqual(server.reported.map((u) => [200, u.prompt_tokens, u.completion_tokens]));
    const cost = lastJson<{ total: { tokens: Record<string, { requests: number; prompt: number; completion: number }> } }>(await fx.cli(['cost', '--json']));
    expect(cost.total.tokens[MODEL]).toMatchObject({
      requests: 4,
      prompt: server.reported.reduce((n, u) => n + u.prompt_tokens, 0),
      completion: server.reported.reduce((n, u) => n + u.completion_tokens, 0),
    });

    // The key nowhere: the run's output, logs and export, every file of the store's folder, every snapshot image.
    const logs = await fx.cli(['logs', runId]);
    const exported = await fx.cli(['export', runId]);
    expectNoLeaks(
      [['run output', Buffer.from(end.stdout + end.stderr)], ['logs', Buffer.from(logs.stdout + logs.stderr)], ['export', Buffer.from(exported.stdout + exported.stderr)], ...filesUnder(fx.dir)],
      [KEY],
    );
    expect(snapshots.length).toBeGreaterThanOrEqual(2);
    // One `docker save` of them all: the base layer they share is scanned once.
    const refs = snapshots.map((snap) => `berth-snapshot:${snap.id}`);
    expect(await expectNoLeaksInImages(fx.docker, refs, [KEY])).toBeGreaterThan(image.Size);
  });

  it('stops the CLI with a typed refusal once the gateway budget is spent: the refusal is on the run, and the edit made before it is kept', async () => {
    server = await startModelServer(SCRIPT);
    fx = await planFixture([], { 'greeting.txt': 'hello, world\n' });
    // The first two answers (the dump, the patch) spend 111 tokens of 100: the third request is refused.
    writeCodexPlan(fx, await codexImage(fx), server.url, 100, [
      ['agent', `${CODEX}; echo "codex exit $?"`],
      ['result', 'cat greeting.txt'],
    ]);
    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_GATEWAY_KEY: KEY });
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { outputs, entries } = await runRecord(fx, runId);
    expect(server.requests.map((r) => r.turn)).toEqual([0, 1]);
    expect(server.reported.reduce((n, u) => n + u.prompt_tokens + u.completion_tokens, 0)).toBe(111);
    // The CLI met the refusal as the rate-limit status its client knows, and stopped without claiming success.
    expect(outputs.agent).toMatch(/codex exit [1-9]/);
    expect(outputs.agent).toContain('429');
    expect(outputs.agent).not.toContain('Changed the greeting');
    // The host says which limit, on its log and in the record.
    expect(end.stderr).toContain('gateway_budget_exhausted');
    const refused = entries.filter((e) => e.kind === 'gateway.refused').map((e) => e.body as { code: string; model: string; message: string });
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused[0]).toMatchObject({ code: 'gateway_budget_exhausted', model: MODEL });
    expect(refused[0]!.message).toContain('111 of gateway.budget.tokens 100');
    expect(entries.filter((e) => e.kind === 'gateway.response')).toHaveLength(2);
    // Nothing lost: the patch applied before the refusal is in the workspace the next step sees.
    expect(outputs.result!.trim()).toBe('goodbye, world');
    expectNoLeaks([['run output', Buffer.from(end.stdout + end.stderr)], ...filesUnder(fx.dir)], [KEY]);
  });
});
