import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// The package's public face, as a consumer sees it: the `npm pack` tarball installed under
// node_modules/berth (its dependencies are the ones this checkout installed), a project that
// imports only the package name, compiled by tsc with library checks on, then run with node.

const repo = process.cwd();

/**
 * Whether dist/ (the bundles and the declarations) is newer than every source it is built from,
 * as `npm ci`'s `prepare` leaves it in CI: `npm pack` then packs it without building it all again
 * (the declarations alone are ~35 s of tsc on the CI machine). Else pack builds, as for a user.
 */
function distFresh(): boolean {
  let newest = statSync(join(repo, 'package-lock.json')).mtimeMs;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${d}/${e.name}`);
      else if (e.name.endsWith('.ts') || e.name.endsWith('.mjs') || e.name.endsWith('.json')) newest = Math.max(newest, statSync(`${d}/${e.name}`).mtimeMs);
    }
  };
  for (const d of ['host', 'environment', 'tools']) walk(join(repo, d));
  try {
    return ['dist/index.mjs', 'dist/openai-agents.mjs', 'dist/berth.cjs', 'dist/types/host/index.d.ts', 'dist/types/host/integrations/openai-agents.d.ts'].every((f) => statSync(join(repo, f)).mtimeMs >= newest);
  } catch {
    return false;
  }
}
const dir = mkdtempSync(join(tmpdir(), 'berth-consumer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CONSUMER = `
import { Berth, BerthError, defineTask, extension, isBerthError, type Run, type RunEvent, type Driven, type BerthOptions, type RemoteBerth } from 'berth';
import { McpSessions, startMcpHttp } from 'berth';
import { z } from 'zod';

void [McpSessions, startMcpHttp];
const hello = defineTask({
  kind: 'hello',
  input: z.object({ name: z.string() }),
  result: z.object({ greeting: z.string() }),
  initialPhase: 'greet',
  phases: { greet: async (ctx) => ({ type: 'complete', result: { greeting: 'hello ' + ctx.value.name } }) },
});
const options: BerthOptions = { store: process.argv[2]!, extensions: [extension('hello', { tasks: [hello] })], signal: AbortSignal.timeout(300_000) };
const remote: RemoteBerth = Berth.connect({ url: 'http://127.0.0.1:7777', token: null });
void remote;
{
  await using berth = await Berth.open(options);
  const { run } = await berth.submitTask({ kind: 'hello', input: { name: 'consumer' }, requestId: 'hello-1' });
  const driving: Promise<Driven> = berth.drive(run.id, { signal: AbortSignal.timeout(120_000) });
  const labels: string[] = [];
  for await (const e of berth.events(run.id)) {
    const ev: RunEvent = e;
    labels.push(ev.label);
  }
  const end = await driving;
  const done: Run = await berth.get(run.id);
  try {
    await berth.get('run_missing');
  } catch (err) {
    if (!(err instanceof BerthError) || !isBerthError(err, 'run_not_found')) throw err;
    console.log(JSON.stringify({ state: done.state, settled: end.settled, commits: labels.length, missing: err.code }));
  }
}
`;

// The Agents SDK face: its own declarations (@openai/agents-core's) need DOM types, so a consumer
// of it compiles with skipLibCheck, as that SDK's own users do; the adapters' types are checked.
const AGENTS = `
import { BerthEditor, BerthShell, berthFunctionTools, type BerthAgentsSession } from 'berth/openai-agents';
const session: BerthAgentsSession = { call: async () => ({ sessionId: 's', runId: 'r', callId: 'c', tool: 'exec', status: 'ok', isError: false, content: 'exit code 0' }) };
const shell = new BerthShell(session);
const out = await shell.run({ commands: ['true'] });
console.log(JSON.stringify({ exit: out.output[0]!.outcome, tools: berthFunctionTools(session).map((t) => t.name), editor: typeof new BerthEditor(session).createFile }));
`;

const DEEP = `
// @ts-expect-error only the package name is exported; its folders are not
import { Kernel } from 'berth/host/kernel';
export const k = Kernel;
`;

describe('the package face', { timeout: 600_000 }, () => {
  it('an npm pack tarball installs as berth, its types compile in a consumer that imports only the package name, and the program runs', () => {
    const packed = join(dir, 'pack');
    mkdirSync(packed);
    // `npm pack` runs `prepare`: the ESM bundle and the declarations are built from these sources
    // (unless dist/ already is: then it packs that build).
    execFileSync('npm', ['pack', '--pack-destination', packed, ...(distFresh() ? ['--ignore-scripts'] : [])], { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'] });
    const tarball = readdirSync(packed).find((f) => f.endsWith('.tgz'))!;
    const consumer = join(dir, 'consumer');
    const installed = join(consumer, 'node_modules', 'berth');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['xzf', join(packed, tarball), '-C', installed, '--strip-components=1']);
    // What `npm install` would bring: the package's dependencies (and the consumer's zod and node types).
    symlinkSync(join(repo, 'node_modules'), join(installed, 'node_modules'));
    symlinkSync(join(repo, 'node_modules', 'zod'), join(consumer, 'node_modules', 'zod'));
    symlinkSync(join(repo, 'node_modules', '@types'), join(consumer, 'node_modules', '@types'));
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }));
    writeFileSync(
      join(consumer, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2023', lib: ['ES2023', 'ESNext.Disposable'], module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, types: ['node'], outDir: 'out' }, include: ['index.ts', 'deep.ts'] }),
    );
    writeFileSync(join(consumer, 'index.ts'), CONSUMER);
    writeFileSync(join(consumer, 'deep.ts'), DEEP);
    // Compiles: an error in the public types, or a deep import that resolves, fails here with tsc's output.
    const tsc = spawnSync(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', consumer], { cwd: consumer, encoding: 'utf8' });
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
    const out = execFileSync(process.execPath, [join(consumer, 'out', 'index.js'), join(dir, 'store.db')], { cwd: consumer, env: { ...process.env, BERTH_HOST_ID: `consumer-${process.pid}` } }).toString();
    const said = JSON.parse(out.trim().split('\n').at(-1)!) as { state: string; settled: boolean; commits: number; missing: string };
    expect(said).toEqual({ state: 'completed', settled: true, commits: expect.any(Number), missing: 'run_not_found' });
    expect(said.commits).toBeGreaterThan(0);

    const agents = join(dir, 'agents');
    mkdirSync(join(agents, 'node_modules'), { recursive: true });
    symlinkSync(installed, join(agents, 'node_modules', 'berth'));
    symlinkSync(join(repo, 'node_modules', '@types'), join(agents, 'node_modules', '@types'));
    writeFileSync(join(agents, 'package.json'), JSON.stringify({ name: 'agents-consumer', type: 'module', private: true }));
    writeFileSync(join(agents, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2023', lib: ['ES2023'], module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, types: ['node'], outDir: 'out' }, include: ['index.ts'] }));
    writeFileSync(join(agents, 'index.ts'), AGENTS);
    const tscAgents = spawnSync(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', agents], { cwd: agents, encoding: 'utf8' });
    expect(tscAgents.status, tscAgents.stdout + tscAgents.stderr).toBe(0);
    const ran = JSON.parse(execFileSync(process.execPath, [join(agents, 'out', 'index.js')], { cwd: agents }).toString().trim());
    expect(ran).toEqual({ exit: { type: 'exit', exitCode: 0 }, tools: ['exec', 'read_file', 'list_files', 'search', 'write_file', 'edit'], editor: 'function' });
  });
});
