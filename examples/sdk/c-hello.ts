/**
 * The c-hello plan submitted through the library, its commits followed as they land, and the
 * result printed: what `berth run examples/c-hello/plan.yaml` does, from a program.
 *
 *   npx tsx examples/sdk/c-hello.ts STORE [PLAN] [--request-id ID] [--after-seq N]
 *
 * In your own project the import is `from 'berth'`. The same request id is the same run: run it
 * again after a crash and it continues that run; `--after-seq` resumes the event stream after the
 * last sequence number seen, so nothing is printed twice.
 */
import { parseArgs } from 'node:util';
import { Berth, type RunEvent } from '../../host/index';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'request-id': { type: 'string', default: 'sdk-c-hello' }, 'after-seq': { type: 'string', default: '0' } } });
const [store, plan = 'examples/c-hello/plan.yaml'] = positionals;
if (!store) {
  process.stderr.write('usage: c-hello.ts STORE [PLAN] [--request-id ID] [--after-seq N]\n');
  process.exit(2);
}

// Ctrl-C stops driving without deciding anything; running this again continues the run.
const stop = new AbortController();
process.once('SIGINT', () => stop.abort());

await using berth = await Berth.open({ store });
const { run, created } = await berth.submitPlan(plan, { requestId: values['request-id'] });
process.stderr.write(`${created ? 'submitted' : 'continuing'} run ${run.id}\n`);

// Driven here, while the loop below follows its commits (a `berth worker` could drive it instead).
const driving = berth.drive(run.id, { signal: stop.signal });
const seen: RunEvent[] = [];
for await (const e of berth.events(run.id, { afterSeq: Number(values['after-seq']), signal: stop.signal })) {
  seen.push(e);
  process.stderr.write(`  #${e.seq} ${e.label} (run ${e.state})\n`);
}
const end = await driving;
const steps = (await berth.store.listTasks({ runId: run.id })).filter((t) => t.kind === 'plan-step').map((t) => ({ outcome: t.outcome, ...(t.result as { step?: string; exitCode?: number } | null) }));
console.log(JSON.stringify({ runId: run.id, state: end.run.state, settled: end.settled, events: seen.length, lastSeq: seen.at(-1)?.seq ?? Number(values['after-seq']), steps: steps.map((s) => ({ step: s.step, exitCode: s.exitCode, outcome: s.outcome })) }));
