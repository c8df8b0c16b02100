import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../support/model-server';
import { lastJson, planFixture } from '../support/plan-fixture';
import { expectNoLeaks, saveImage, type Scanned } from '../support/secret-scan';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let server: ModelServer | undefined;
// Generous: removing snapshot images waits behind other tests' paused commits on the shared engine.
afterEach(async () => {
  await server?.close();
  await fx?.cleanup();
  fx = undefined;
  server = undefined;
}, 240_000);

const KEY = `sk-gw-${randomBytes(18).toString('hex')}`;
const MODEL = 'scripted-small';

/** The plan's environment: allowlist network (nothing allowed but the gateway) and the gateway to the scripted provider. */
function gatewayEnv(image: { ref: string; id: string }, providerUrl: string, extra = ''): string {
  return [
    'kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }',
    `image: { ref: "${image.ref}", digest: "${image.id}" }`,
    'resources: { memoryMb: 512, commandTimeoutS: 120 }',
    'lease: { ttlS: 600, heartbeatS: 10 }',
    'network: { mode: allowlist, allow: [] }',
    'gateway:',
    `  provider: { baseUrl: "${providerUrl}", key: { env: BERTH_TEST_GATEWAY_KEY } }`,
    `  models: [${MODEL}]`,
    extra,
  ].join('\n');
}

function writePlan(dir: string, steps: Array<[name: string, run: string]>): void {
  writeFileSync(join(dir, 'plan.yaml'), `name: gateway\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map(([n, r]) => `  - name: ${n}\n    run: ${JSON.stringify(r)}\n    replay: never\n`).join('')}`);
}

/** Every file under `dir` (the store, its WAL, anything the host wrote). */
function filesUnder(dir: string): Scanned {
  const out: Scanned = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push([p, readFileSync(p)]);
  }
  return out;
}

async function stepOutputs(f: NonNullable<typeof fx>, runId: string): Promise<Record<string, string>> {
  return f.read(async (s) => {
    const run = (await s.getRun(runId))!;
    const out: Record<string, string> = {};
    for (const e of await s.listEntries(run.sessionId)) {
      if (e.kind === 'plan.step.output') out[(e.body as { step: string }).step] = (e.body as { stdoutTail: string }).stdoutTail;
    }
    return out;
  });
}

describe('the model gateway', { timeout: 300_000 }, () => {
  it('forwards a sandbox client to the provider with the real key, which appears nowhere in the sandbox, its snapshots, the store or the logs; usage is in berth cost', async () => {
    server = await startModelServer(() => ({ content: 'hello from the provider' }));
    fx = await planFixture([]);
    const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
    writeFileSync(join(fx.dir, 'env.yaml'), gatewayEnv({ ref: 'berth/tiny:latest', id: tiny }, server.url));
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    // busybox wget ignores no_proxy and turns a POST into a GET through a proxy, so it is told to go direct.
    const post = `http_proxy= busybox wget -q -O - --header 'Content-Type: application/json' --post-data '${body}' "$OPENAI_BASE_URL/chat/completions"`;
    // Every process of the sandbox's user, the step's own shell included: their environments, kept in a
    // workspace file (so the snapshot scan reads them too). The root processes' environment is the
    // container's configuration, which every snapshot image carries in its config.
    const environ = 'for f in /proc/[0-9]*/environ; do cat "$f"; echo; done > environ.dump 2>/dev/null; tr "\\0" "\\n" < environ.dump | grep -E "^OPENAI_(API_KEY|BASE_URL)=" | sort -u';
    writePlan(fx.dir, [['ask', post], ['environ', environ], ['again', post]]);

    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_GATEWAY_KEY: KEY, BERTH_LOG_LEVEL: 'debug' });
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const outputs = await stepOutputs(fx, runId);
    // What the sandbox's clients see in place of a key, and where to send requests.
    expect(outputs.environ).toMatch(/^OPENAI_API_KEY=berth-gateway\nOPENAI_BASE_URL=http:\/\/[\d.]+:3128\/v1\n$/);
    for (const step of ['ask', 'again']) expect(JSON.parse(outputs[step]!).choices[0].message.content).toBe('hello from the provider');
    // The provider saw the real key on each request; the sandbox never had it.
    expect(server.requests.map((r) => r.authorization)).toEqual([`Bearer ${KEY}`, `Bearer ${KEY}`]);

    const { entries, snapshots } = await fx.read(async (s) => {
      const r = (await s.getRun(runId))!;
      return { entries: await s.listEntries(r.sessionId, { runId }), snapshots: await s.listSnapshots({ runId }) };
    });
    const responses = entries.filter((e) => e.kind === 'gateway.response').map((e) => e.body as { model: string; status: number; usage: { prompt: number; completion: number } });
    expect(entries.filter((e) => e.kind === 'gateway.request').map((e) => (e.body as { model: string }).model)).toEqual([MODEL, MODEL]);
    expect(responses.map((r) => [r.model, r.status, r.usage.prompt, r.usage.completion])).toEqual(server.reported.map((u) => [MODEL, 200, u.prompt_tokens, u.completion_tokens]));

    const cost = lastJson<{ total: { tokens: Record<string, { requests: number; prompt: number; completion: number }> } }>(await fx.cli(['cost', '--json']));
    expect(cost.total.tokens[MODEL]).toMatchObject({
      requests: 2,
      prompt: server.reported.reduce((n, u) => n + u.prompt_tokens, 0),
      completion: server.reported.reduce((n, u) => n + u.completion_tokens, 0),
    });

    const logs = await fx.cli(['logs', runId]);
    const exported = await fx.cli(['export', runId]);
    const scanned: Scanned = [];
    scanned.push(['run output', Buffer.from(end.stdout + end.stderr)], ['logs', Buffer.from(logs.stdout + logs.stderr)], ['export', Buffer.from(exported.stdout + exported.stderr)]);
    scanned.push(...filesUnder(fx.dir));
    expect(snapshots.length).toBeGreaterThanOrEqual(3);
    for (const snap of snapshots) scanned.push([`image ${snap.id}`, await saveImage(fx.docker, `berth-snapshot:${snap.id}`)]);
    expectNoLeaks(scanned, [KEY]);
  });

  it("runs the real openai client in the sandbox through the gateway: completions and streams answer, an exhausted budget and a model not allowed are typed errors recorded on the run", async () => {
    server = await startModelServer(() => ({ content: 'hello from the provider' }));
    fx = await planFixture([]);
    const dev = await fx.docker
      .getImage('berth/dev:latest')
      .inspect()
      .catch(() => {
        throw new Error('image berth/dev:latest is missing on this engine; build it with `npm run images -- dev`');
      });
    mkdirSync(join(fx.dir, 'ws'), { recursive: true });
    await build({ entryPoints: [join(import.meta.dirname, '../support/gateway-client.mjs')], outfile: join(fx.dir, 'ws', 'client.mjs'), bundle: true, platform: 'node', format: 'esm', target: 'node18', logLevel: 'error' });
    // Each scripted answer reports 15 prompt and 26 completion tokens: the third answer passes the budget, the fourth request is refused.
    writeFileSync(join(fx.dir, 'env.yaml'), gatewayEnv({ ref: 'berth/dev:latest', id: dev.Id }, server.url, '  budget: { tokens: 100 }\nsnapshot: { policy: never }\n'));
    writePlan(fx.dir, [['complete', 'node client.mjs complete'], ['budget', 'node client.mjs refusals']]);
    const end = await fx.cli(['run', fx.plan], { BERTH_TEST_GATEWAY_KEY: KEY });
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const outputs = await stepOutputs(fx, runId);
    expect(JSON.parse(outputs.complete!)).toEqual({ text: 'hello from the provider', usage: server.reported[0], streamed: 'hello from the provider', models: [MODEL] });
    const [first, exhausted, notAllowed] = JSON.parse(outputs.budget!) as Array<Record<string, unknown>>;
    expect(first).toMatchObject({ ok: true, text: 'hello from the provider' });
    expect(exhausted).toMatchObject({ ok: false, name: 'RateLimitError', status: 429, code: 'gateway_budget_exhausted', type: 'berth_gateway' });
    expect(exhausted!.message).toContain('123 of gateway.budget.tokens 100');
    expect(notAllowed).toMatchObject({ ok: false, name: 'PermissionDeniedError', status: 403, code: 'gateway_model_not_allowed' });
    expect(notAllowed!.message).toContain('"not-allowed-model" is not in gateway.models');
    // Refused requests never reach the provider.
    expect(server.requests).toHaveLength(3);
    expect(server.requests[1]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const refused = await fx.read(async (s) => {
      const r = (await s.getRun(runId))!;
      return (await s.listEntries(r.sessionId, { runId })).filter((e) => e.kind === 'gateway.refused').map((e) => [(e.body as { code: string }).code, (e.body as { model: string }).model]);
    });
    expect(refused).toEqual([
      ['gateway_budget_exhausted', MODEL],
      ['gateway_model_not_allowed', 'not-allowed-model'],
    ]);
    expectNoLeaks([['run output', Buffer.from(end.stdout + end.stderr)], ...filesUnder(fx.dir)], [KEY]);
  });

  it("serves an agent session's sandbox too: the agent's command reaches the provider through the gateway, recorded on the agent's run", async () => {
    server = await startModelServer(() => ({ content: 'hello from the provider' }));
    fx = await planFixture([]);
    const ask = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    const command = `http_proxy= busybox wget -q -O - --header 'Content-Type: application/json' --post-data '${ask}' "$OPENAI_BASE_URL/chat/completions"`;
    const agentModel = await startModelServer([{ toolCalls: [{ name: 'exec', arguments: { command, safe: true } }] }, { content: 'Asked.' }]);
    try {
      const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
      const envFile = join(fx.dir, 'env.yaml');
      writeFileSync(envFile, gatewayEnv({ ref: 'berth/tiny:latest', id: tiny }, server.url));
      const end = await fx.cli(['agent', 'ask the model', '--env', envFile, '--workspace', join(fx.dir, 'ws'), '--model', 'scripted-1', '--base-url', agentModel.url, '--api-key-env', 'TEST_MODEL_KEY', '--json'], {
        TEST_MODEL_KEY: 'sk-agent-model',
        BERTH_TEST_GATEWAY_KEY: KEY,
      });
      expect(end.code, end.stderr).toBe(0);
      expect(server.requests.map((r) => r.authorization)).toEqual([`Bearer ${KEY}`]);
      const { results, responses } = await fx.read(async (s) => {
        const run = (await s.listRuns())[0]!;
        const entries = await s.listEntries(run.sessionId, { runId: run.id });
        return {
          results: entries.filter((e) => e.kind === 'agent.tool_result').map((e) => (e.body as { content: string }).content),
          responses: entries.filter((e) => e.kind === 'gateway.response').map((e) => (e.body as { status: number; model: string }).status),
        };
      });
      expect(results[0]).toContain('hello from the provider');
      expect(responses).toEqual([200]);
      const cost = lastJson<{ total: { tokens: Record<string, { requests: number }> } }>(await fx.cli(['cost', '--json']));
      // The agent's own model and the model its command asked through the gateway, side by side.
      expect(cost.total.tokens[MODEL]?.requests).toBe(1);
      expect(cost.total.tokens['scripted-1']?.requests).toBe(2);
      expectNoLeaks([['agent output', Buffer.from(end.stdout + end.stderr)], ...filesUnder(fx.dir)], [KEY]);
    } finally {
      await agentModel.close();
    }
  });
});
