import type { StepResult } from '../../plan';
import { ENTRY, type ModelEntry, type ToolResultEntry } from '../../agent';
import type { OutputChunk } from '../../store';
import type { CliContext } from '../context';
import { LineCap } from '../line-cap';
import { duration, escapeControl, LOG_COLUMN } from '../output';
import { driverOf, readHost } from '../../api/run-driver';
import { getRunOrThrow } from './runs';
import { agentHistory, attemptViews, decisionLine, decisionsOf, isLive, planHistory } from './logs-history';

const POLL_MS = 200;
/** Polls between two reads of who drives the run (two store reads each). */
const HOST_EVERY = 5;

type Line = { stream: 'stdout' | 'stderr' | 'berth'; text: string; attempt?: string; label?: string };

/**
 * `berth logs -f RUN`: the history as `berth logs` prints it (without the output of attempts still
 * running), then every chunk of output, finished step, tool result and decision as the store gets
 * them, read from the store (so it follows a detached run, a worker's, or another host's on a shared
 * store), until the run is over or parked and nothing more arrives. Output is printed line by line;
 * a line still being printed waits for its end (or its attempt's end).
 */
export async function followLogs(ctx: CliContext, runId: string): Promise<number> {
  let run = await getRunOrThrow(ctx.store, runId);
  // An imported run is a record: the store refuses every commit to it, so in whatever state it was
  // exported (admitted, running, parked) nothing more can arrive. Following it would wait forever.
  const imported = await ctx.store.getImportedRun(runId);
  const [entries, transitions, chunks] = await Promise.all([ctx.store.listEntries(run.sessionId, { runId }), ctx.store.listRunTransitions(runId), ctx.store.listOutput({ runId })]);
  const attempts = attemptViews(chunks, run);
  const running = new Set(attempts.filter((a) => a.state === 'running').map((a) => a.attempt));
  const write = (l: Line) => {
    if (ctx.json) process.stdout.write(`${JSON.stringify({ runId, ...l })}\n`);
    else process.stdout.write(`${(l.stream === 'berth' ? LOG_COLUMN.berth : LOG_COLUMN[l.stream]) + escapeControl(l.text)}\n`);
  };
  const done = attempts.filter((a) => !running.has(a.attempt));
  const history = run.kind === 'agent' ? agentHistory(entries, done, transitions) : planHistory(entries, done, transitions);
  if (ctx.json) for (const h of history) write({ stream: 'berth', text: h });
  else if (history.length) process.stdout.write(`${history.join('\n')}\n`);

  // Chunks of attempts running now are read again from their start: their history was left out.
  let afterOutput = chunks.filter((c) => !running.has(c.attempt)).reduce((m, c) => Math.max(m, c.seq), 0);
  if (running.size) afterOutput = Math.min(...chunks.filter((c) => running.has(c.attempt)).map((c) => c.seq)) - 1;
  let afterEntry = entries.reduce((m, e) => Math.max(m, e.seq), 0);
  let afterTransition = transitions.reduce((m, t) => Math.max(m, t.n), 0);
  const lines = new Map<string, LineCap>();
  const seenAttempt = new Set<string>(done.map((a) => a.attempt));
  const kindOf = (c: OutputChunk) => (c.source.startsWith('tool:') ? 'tool' : 'step');
  const print = (c: OutputChunk) => {
    if (!seenAttempt.has(c.attempt)) {
      seenAttempt.add(c.attempt);
      write({ stream: 'berth', text: `${kindOf(c)} ${c.label}: started ${new Date(c.at).toISOString()}`, attempt: c.attempt, label: c.label });
    }
    if (c.channel === 'end') {
      for (const ch of ['stdout', 'stderr'] as const) {
        const rest = lines.get(`${c.attempt}:${ch}`)?.end();
        if (rest !== undefined) write({ stream: ch, text: rest, attempt: c.attempt, label: c.label });
        lines.delete(`${c.attempt}:${ch}`);
      }
      write({ stream: 'berth', text: `${kindOf(c)} ${c.label}: ${c.text}${c.cutBytes ? ` (${c.cutBytes} bytes cut by the cap)` : ''}`, attempt: c.attempt, label: c.label });
      return;
    }
    const key = `${c.attempt}:${c.channel}`;
    let cap = lines.get(key);
    if (!cap) lines.set(key, (cap = new LineCap()));
    for (const text of cap.push(c.text)) write({ stream: c.channel, text, attempt: c.attempt, label: c.label });
  };

  let quietAfterEnd = false;
  // Said when no live host drives the run any more (a SIGKILLed \`berth run\`, a dead worker) and when
  // one does again: nothing else would tell a follower why the output stopped, and it keeps
  // following, because a resume or a worker's claim continues the same run.
  let driven: 'live' | 'none' | undefined;
  let polls = 0;
  const sayHost = async () => {
    if (imported || !isLive(run)) return;
    const now = Date.now();
    const host = await readHost(ctx.store, now, ctx.hostId, run.sessionId);
    const seen = host?.live ? 'live' : 'none';
    if (seen === driven || (driven === undefined && seen === 'live')) return void (driven = seen);
    driven = seen;
    const { line } = driverOf(run, host, now);
    write({ stream: 'berth', text: seen === 'live' ? `run ${runId} is ${line}` : `run ${runId} is ${line}; following on` });
  };
  for (;;) {
    if (polls++ % HOST_EVERY === 0) await sayHost();
    const fresh = await ctx.store.listOutput({ runId, afterSeq: afterOutput, limit: 1000 });
    for (const c of fresh) {
      print(c);
      afterOutput = c.seq;
    }
    const newEntries = await ctx.store.listEntries(run.sessionId, { runId, afterSeq: afterEntry });
    for (const e of newEntries) {
      afterEntry = e.seq;
      if (e.kind === 'plan.step.output') {
        const s = e.body as unknown as StepResult;
        write({ stream: 'berth', text: `step ${s.step}: exit ${s.exitCode}, ${duration(s.durationMs)}${s.snapshotId ? `, snapshot ${s.snapshotId}` : ''}` });
      } else if (e.kind === ENTRY.model) {
        const m = e.body as unknown as ModelEntry;
        for (const c of m.toolCalls) write({ stream: 'berth', text: `turn ${m.turn}: tool call ${c.name} ${c.id}` });
        if (!m.toolCalls.length) write({ stream: 'berth', text: `turn ${m.turn}: answer (${m.finishReason})` });
      } else if (e.kind === ENTRY.toolResult) {
        const r = e.body as unknown as ToolResultEntry;
        write({ stream: 'berth', text: `tool ${r.name} ${r.toolCallId}: ${r.status}${r.isError ? ' (error)' : ''}` });
      }
    }
    for (const t of decisionsOf((await ctx.store.listRunTransitions(runId)).filter((t) => t.n > afterTransition))) write({ stream: 'berth', text: decisionLine(t) });
    afterTransition = Math.max(afterTransition, ...(await ctx.store.listRunTransitions(runId)).map((t) => t.n));
    run = (await ctx.store.getRun(runId))!;
    const moved = fresh.length > 0 || newEntries.length > 0;
    // Over, or parked for a person: one more quiet read after that, so nothing written just before is missed.
    if (imported || !isLive(run) || run.state === 'awaiting_approval') {
      if (!moved && quietAfterEnd) break;
      quietAfterEnd = !moved;
    }
    if (fresh.length < 1000) await new Promise((r) => setTimeout(r, POLL_MS));
  }
  write({ stream: 'berth', text: `run ${runId} is ${run.state}${imported ? ` (an imported record, read-only: nothing drives it in this store)` : ''}` });
  return 0;
}
