/**
 * `npm run bench -- sdk`: how soon a program sees its submitted run, through the library and
 * through `berth serve`'s API, against the CLI way (`berth run PLAN --detach`, then the first
 * `berth show RUN`), each on a SQLite store of its own, a tiny plan on berth/tiny (nothing drives
 * the runs: the submission's own commit is the first event).
 *   sdk.submit_to_first_event_ms          p50, Berth.open'ed host: submitPlan + first event of berth.events()
 *   sdk.remote_submit_to_first_event_ms   p50, Berth.connect to a berth serve child: submitPlan + first SSE event
 *   sdk.cli_detach_then_show_ms           p50, the CLI baseline (two processes)
 *   sdk.library_vs_cli / sdk.remote_vs_cli the ratios (goals: <= 0.2x, <= 0.5x)
 *   sdk.events_per_s / sdk.remote_events_per_s
 *                                          following, from its first commit to its end, a run of an
 *                                          application task kind that made 10,000 commits (one entry
 *                                          each), in process and through berth serve's SSE (goals:
 *                                          >= 5,000/s, >= 2,000/s)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { z } from 'zod';
import { Berth, defineTask, extension } from '../host/index';
import type { Suite } from './run';
import { median, timed } from './_stats';

const ROUNDS = Number(process.env.BENCH_SDK_ROUNDS ?? 7);
const hostId = `bench-sdk-${process.pid}`;

function planDir(digest: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-sdk-'));
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\n`);
  writeFileSync(join(dir, 'plan.yaml'), 'name: bench\nenvironment: env.yaml\nsteps:\n  - name: one\n    run: "true"\n');
  return dir;
}

const cli = (args: string[]) => execFileSync(process.execPath, ['host/cli/bin.mjs', ...args], { env: { ...process.env, BERTH_HOST_ID: hostId }, stdio: ['ignore', 'pipe', 'pipe'] }).toString();

const EVENTS = Number(process.env.BENCH_SDK_EVENTS ?? 10_000);

/** One commit (with one entry) per phase, EVENTS times: a run whose follower has EVENTS events to read. */
const ticks = defineTask({
  kind: 'bench-ticks',
  input: z.object({ n: z.number().int() }),
  checkpoint: z.object({ i: z.number().int() }),
  initialPhase: 'tick',
  phases: {
    tick: async (ctx) => {
      const i = ctx.state?.i ?? 0;
      if (i >= ctx.value.n) return { type: 'complete', result: { ticks: i } };
      return { type: 'next', phase: 'tick', checkpoint: { i: i + 1 }, writes: { entries: [{ kind: 'bench.tick', body: { i } }] } };
    },
  },
});

/** Events per second of `follow` reading a settled run's whole log. */
async function eventsPerSecond(follow: () => AsyncIterable<unknown>): Promise<{ perS: number; events: number }> {
  let events = 0;
  const [ms] = await timed(async () => {
    for await (const _ of follow()) events += 1;
  });
  return { perS: events / (ms / 1000), events };
}

const suite: Suite = async (report) => {
  execFileSync(process.execPath, ['host/cli/bundle.mjs']);
  const digest = (await new Dockerode({ socketPath: '/var/run/docker.sock' }).getImage('berth/tiny:latest').inspect()).Id;
  const dir = planDir(digest);
  const plan = join(dir, 'plan.yaml');
  try {
    const library: number[] = [];
    {
      await using berth = await Berth.open({ store: join(dir, 'lib.db'), hostId });
      for (let i = 0; i < ROUNDS; i++) {
        const [ms] = await timed(async () => {
          const { run } = await berth.submitPlan(plan, { requestId: `lib-${i}` });
          for await (const _ of berth.events(run.id, { forever: true })) break;
        });
        library.push(ms);
      }
    }

    const baseline: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const store = join(dir, 'cli.db');
      const [ms] = await timed(async () => {
        const out = cli(['run', plan, '--detach', '--json', '--store', store, '--request-id', `cli-${i}`]);
        const id = /"id":\s*"(run_[0-9a-z]+)"/.exec(out)![1]!;
        cli(['show', id, '--json', '--store', store]);
      });
      baseline.push(ms);
    }

    const remote: number[] = [];
    cli(['run', plan, '--detach', '--store', join(dir, 'remote.db'), '--request-id', 'warm']);
    const server = spawn(process.execPath, ['host/cli/bin.mjs', 'serve', '--port', '0', '--store', join(dir, 'remote.db')], { env: { ...process.env, BERTH_HOST_ID: hostId } });
    let out = '';
    server.stdout.on('data', (d) => (out += d));
    while (!/berth serve: http/.test(out)) await new Promise((r) => setTimeout(r, 50));
    const url = /berth serve: (http:\/\/\S+)/.exec(out)![1]!;
    const token = /with this token[^\n]*\n\s+([0-9a-f]{64})/.exec(out)![1]!;
    try {
      const client = Berth.connect({ url, token });
      for (let i = 0; i < ROUNDS; i++) {
        const [ms] = await timed(async () => {
          const { run } = await client.submitPlan(plan, { requestId: `remote-${i}` });
          const ctl = new AbortController();
          for await (const _ of client.events(run.id, { signal: ctl.signal })) break;
          ctl.abort();
        });
        remote.push(ms);
      }
    } finally {
      server.kill('SIGTERM');
    }
    // Following a long run: produced here (the kind is this program's), then read from its start.
    const eventsDb = join(dir, 'events.db');
    let runId: string;
    let inProcess: { perS: number; events: number };
    {
      await using berth = await Berth.open({ store: eventsDb, hostId, extensions: [extension('bench', { tasks: [ticks] })] });
      const { run } = await berth.submitTask({ kind: 'bench-ticks', input: { n: EVENTS }, requestId: 'ticks' });
      const end = await berth.drive(run.id, { signal: AbortSignal.timeout(600_000) });
      if (end.run.state !== 'completed') throw new Error(`the ticking run ended ${end.run.state}`);
      runId = run.id;
      inProcess = await eventsPerSecond(() => berth.events(runId));
    }
    const eventsServer = spawn(process.execPath, ['host/cli/bin.mjs', 'serve', '--port', '0', '--store', eventsDb], { env: { ...process.env, BERTH_HOST_ID: hostId } });
    let eventsOut = '';
    eventsServer.stdout.on('data', (d) => (eventsOut += d));
    let remoteEvents: { perS: number; events: number };
    try {
      while (!/berth serve: http/.test(eventsOut)) await new Promise((r) => setTimeout(r, 50));
      // The token file beside the store was written by the first server of this folder; the login link is printed only then.
      const client = Berth.connect({ url: /berth serve: (http:\/\/\S+)/.exec(eventsOut)![1]!, token: readFileSync(join(dir, 'serve-token'), 'utf8').trim() });
      remoteEvents = await eventsPerSecond(() => client.events(runId));
    } finally {
      eventsServer.kill('SIGTERM');
    }
    if (remoteEvents.events !== inProcess.events) throw new Error(`remote follow saw ${remoteEvents.events} events, in process ${inProcess.events}`);
    console.log(`# ${inProcess.events} events followed (a run of ${EVENTS} ticks)`);

    const [lib, rem, base] = [median(library), median(remote), median(baseline)];
    report('submit_to_first_event_ms', lib, 'absolute');
    report('remote_submit_to_first_event_ms', rem, 'absolute');
    report('cli_detach_then_show_ms', base, 'absolute');
    report('library_vs_cli', lib / base, 'ratio');
    report('remote_vs_cli', rem / base, 'ratio');
    report('events_per_s', inProcess.perS, 'absolute');
    report('remote_events_per_s', remoteEvents.perS, 'absolute');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

export default suite;
