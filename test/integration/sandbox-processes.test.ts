import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** Exits 1 (and says so) when a `sleep 600` is running in the sandbox; `[0]` keeps grep from matching itself. */
const NO_LEFTOVER = 'if ps | grep -q "sleep 60[0]"; then echo "leftover: $(ps | grep "sleep 60[0]")"; exit 1; fi; echo clean';
const HAS_SERVICE = 'ps | grep -q "sleep 60[0]" && echo service-running';

interface Summary {
  run: { id: string; state: string };
  steps: Array<{ step: string; exitCode: number; outcome: string; stdoutTail?: string }>;
}

const rot13 = (s: string) => s.replace(/[a-z]/gi, (c) => String.fromCharCode(((c.toLowerCase().charCodeAt(0) - 97 + 13) % 26) + (c === c.toLowerCase() ? 97 : 65)));

/**
 * A thief of the same uid as every step: it leaves its session with setsid and, for as long as it
 * lives, copies every file it can reach under the secret directories (old and new) and every file
 * a `*_FILE` variable of any process it can read names, into /dev/shm/loot.
 */
const THIEF = [
  "setsid sh -c 'while :; do",
  'cat /dev/shm/berth-secrets/*/* /dev/berth/*/* >> /dev/shm/loot 2>/dev/null;',
  'for e in /proc/[0-9]*/environ; do tr "\\0" "\\n" < $e 2>/dev/null | sed -n "s/^[A-Z_]*_FILE=//p" | while read -r p; do cat "$p" >> /dev/shm/loot 2>/dev/null; done; done;',
  "sleep 0.05; done' berth-thief </dev/null >/dev/null 2>&1 &",
  'echo planted',
].join(' ');

describe('no process outlives its step', { timeout: 240_000 }, () => {
  it('kills a background `sleep 600 &` of step 1 when step 1 ends, so step 2 starts without it', async () => {
    fx = await planFixture([
      { name: 'spawn', run: 'sleep 600 & echo started' },
      { name: 'check', run: NO_LEFTOVER },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-2000) + end.stdout.slice(-2000)).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
  });

  it('kills what a step that failed or timed out left in the background too', async () => {
    fx = await planFixture([
      { name: 'spawn-and-fail', run: 'sleep 600 & exit 3' },
      { name: 'check', run: NO_LEFTOVER },
    ]);
    // allowFailure lets the plan go on to the check after the failed step.
    writeFileSync(
      fx.plan,
      `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: spawn-and-fail\n    run: ${JSON.stringify('sleep 600 & exit 3')}\n    allowFailure: true\n  - name: spawn-and-time-out\n    run: ${JSON.stringify('sleep 600 & sleep 30')}\n    timeoutS: 1\n    allowFailure: true\n  - name: check\n    run: ${JSON.stringify(NO_LEFTOVER)}\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json']);
    const summary = lastJson<Summary>(end);
    expect(summary.steps.map((s) => [s.step, s.exitCode]), end.stderr.slice(-2000)).toEqual([
      ['spawn-and-fail', 3],
      ['spawn-and-time-out', expect.any(Number)],
      ['check', 0],
    ]);
  });

  it('keeps a long-lived service only for a step that says keepProcesses: true, and records that on the run', async () => {
    fx = await planFixture([{ name: 'placeholder', run: 'true' }]);
    writeFileSync(
      fx.plan,
      `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: service\n    run: ${JSON.stringify('sleep 600 & echo started')}\n    keepProcesses: true\n  - name: use\n    run: ${JSON.stringify(HAS_SERVICE)}\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-2000) + end.stdout.slice(-2000)).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const root = await fx.read(async (s) => (await s.listTasks({ runId })).find((t) => t.kind === 'plan')!);
    const steps = (root.input as { plan: { steps: Array<{ name: string; keepProcesses?: boolean }> } }).plan.steps;
    expect(steps.map((s) => [s.name, s.keepProcesses])).toEqual([
      ['service', true],
      ['use', false],
    ]);
  });
});

describe('a process left by one step never sees a later step', { timeout: 240_000 }, () => {
  it('a setsid thief started in step 1 is gone before step 2 and never sees the file secret step 3 is given', async () => {
    const key = `key-${Math.random().toString(36).slice(2)}-file-secret`;
    fx = await planFixture([{ name: 'placeholder', run: 'true' }]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(`${fx.dir}/deploy.key`, `${key}\n`);
    writeFileSync(envFile, readFileSync(envFile, 'utf8') + `secrets:\n  - { name: DEPLOY_KEY, from: { file: ${fx.dir}/deploy.key }, expose: file, to: [use] }\n`);
    const alive = 'if ps -o args | grep -q "[b]erth-thief"; then echo thief-alive; exit 1; fi; echo no-thief';
    const use = 'test -s "$DEPLOY_KEY_FILE" && sleep 1 && echo used';
    // rot13 is no form the scrubber knows: what the thief got would reach the store as it is.
    const show = "printf 'loot='; tr 'a-zA-Z' 'n-za-mN-ZA-M' < /dev/shm/loot 2>/dev/null; echo";
    const steps: Array<[string, string, string]> = [
      ['plant', THIEF, ''],
      ['check', alive, '    allowFailure: true\n'],
      ['use', use, '    secrets: [DEPLOY_KEY]\n'],
      ['show', show, ''],
    ];
    writeFileSync(fx.plan, `name: thief\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map(([n, r, extra]) => `  - name: ${n}\n    run: ${JSON.stringify(r)}\n${extra}`).join('')}`);
    const end = await fx.cli(['run', fx.plan, '--json']);
    const summary = lastJson<Summary>(end);
    expect(summary.steps.map((s) => [s.step, s.exitCode]), end.stderr.slice(-2000)).toEqual([
      ['plant', 0],
      ['check', 0],
      ['use', 0],
      ['show', 0],
    ]);
    const shown = summary.steps.find((s) => s.step === 'show')!.stdoutTail!;
    expect(rot13(shown)).not.toContain(key);
    expect(shown.trim()).toBe('loot=');
  });
});

describe('a kept service and a later step\'s file secret', { timeout: 240_000 }, () => {
  it('a keepProcesses service that scans the secret directories while a later step runs never finds its file secret', async () => {
    const key = `key-${Math.random().toString(36).slice(2)}-kept-scan`;
    fx = await planFixture([{ name: 'placeholder', run: 'true' }]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(`${fx.dir}/deploy.key`, `${key}\n`);
    writeFileSync(envFile, readFileSync(envFile, 'utf8') + `secrets:\n  - { name: DEPLOY_KEY, from: { file: ${fx.dir}/deploy.key }, expose: file, to: [use] }\n`);
    // Only the directories: what a kept service can read through /proc is the documented price of keeping it.
    const keeper = "setsid sh -c 'while :; do cat /dev/shm/berth-secrets/*/* /dev/berth/*/* >> /dev/shm/loot 2>/dev/null; sleep 0.05; done' berth-keeper </dev/null >/dev/null 2>&1 & echo kept";
    const use = 'test -s "$DEPLOY_KEY_FILE" && sleep 1 && echo used';
    const show = "ps -o args | grep -q '[b]erth-keeper' && echo keeper-alive; printf 'loot='; tr 'a-zA-Z' 'n-za-mN-ZA-M' < /dev/shm/loot 2>/dev/null; echo";
    writeFileSync(
      fx.plan,
      `name: keeper\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: keep\n    run: ${JSON.stringify(keeper)}\n    keepProcesses: true\n  - name: use\n    run: ${JSON.stringify(use)}\n    secrets: [DEPLOY_KEY]\n  - name: show\n    run: ${JSON.stringify(show)}\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json']);
    const summary = lastJson<Summary>(end);
    expect(summary.steps.map((s) => [s.step, s.exitCode]), end.stderr.slice(-2000)).toEqual([
      ['keep', 0],
      ['use', 0],
      ['show', 0],
    ]);
    const shown = summary.steps.find((s) => s.step === 'show')!.stdoutTail!;
    expect(rot13(shown)).not.toContain(key);
    expect(shown.trim()).toBe('keeper-alive\nloot=');
  });
});

describe('processes of a dead host', { timeout: 300_000 }, () => {
  it('kills the still-writing step of a SIGKILLed host on attach, before --accept snapshots the sandbox', async () => {
    // The writer prints and appends a line every 50 ms for over an hour unless killed.
    const writer = 'i=0; while [ $i -lt 100000 ]; do echo $i | tee -a out; i=$((i+1)); sleep 0.05; done';
    // Lines at its start, then two seconds later: equal only when nothing writes any more.
    const check = 'a=$(wc -l < out); sleep 2; b=$(wc -l < out); echo "$a $b"; [ "$a" = "$b" ]';
    fx = await planFixture([
      { name: 'writer', run: writer, replay: 'never' },
      { name: 'check', run: check },
    ]);
    const child = spawn(process.execPath, [await bundledCli(), 'run', fx.plan, '--store', fx.store, '--json'], {
      env: { ...process.env, BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise((r) => child.once('exit', r));
    let seen = 0;
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.includes('"step-output"') && line.includes('"writer"') && (seen += 1) >= 3) resolve();
      });
      child.once('exit', (c) => reject(new Error(`the host ended before the step wrote (${c})`)));
    });
    child.kill('SIGKILL');
    await exited;
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);

    const parked = await fx.cli(['resume', runId, '--json']);
    expect(parked.code, parked.stderr.slice(-2000)).toBe(3);
    const done = await fx.cli(['reconcile', runId, '--accept', '--json']);
    const summary = lastJson<Summary>(done);
    expect(summary.steps.map((s) => [s.step, s.outcome]), done.stderr.slice(-2000) + done.stdout.slice(-3000)).toEqual([
      ['writer', 'interrupted'],
      ['check', 'ok'],
    ]);
    expect(summary.run.state).toBe('completed');
    // The snapshot --accept took holds exactly what the check step found: nothing wrote after it.
    const accepted = await fx.read(async (s) => (await s.listSnapshots({ runId })).find((x) => x.checkpoint.startsWith('reconciled:'))!);
    const c = await fx.docker.createContainer({ Image: accepted.imageId, Entrypoint: [], Cmd: ['sh', '-c', 'wc -l < /workspace/out'], Labels: { 'berth.host': fx.hostId } });
    try {
      await c.start();
      await c.wait();
      const inSnapshot = (await c.logs({ stdout: true })).toString('utf8').replace(/[\x00-\x08]/g, '').trim().replace(/^\D+/, '');
      const tail = (await fx.read((s) => s.listTasks({ runId }))).find((t) => t.kind === 'plan-step' && (t.result as { step?: string } | null)?.step === 'check')!;
      const [a] = ((tail.result as { stdoutTail: string }).stdoutTail.trim().split(' '));
      expect(Number(inSnapshot)).toBeGreaterThan(0);
      expect(Number(inSnapshot)).toBe(Number(a));
    } finally {
      await c.remove({ force: true });
    }
  });
});
