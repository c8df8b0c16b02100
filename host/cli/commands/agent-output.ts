import type { AgentLiveEvent, ApprovalRequestedEntry, InterruptionEntry, ModelEntry, ToolResultEntry } from '../../agent';
import { ENTRY } from '../../agent';
import type { Entry } from '../../model';
import { capLines, escapeControl, LiveLineCap } from '../output';

/**
 * `s` on one line (newlines shown as ⏎), at most `n` characters. Only a bounded head is ever looked
 * at: the whitespace pattern backtracks over a run of spaces, so on a whole 128 KiB tool result of
 * spaces it took 15 s.
 */
export function brief(s: string, n: number): string {
  const head = s.slice(0, n * 4);
  const line = head.replace(/\s*\n\s*/g, ' ⏎ ');
  return line.length > n || head.length < s.length ? `${line.slice(0, n)}…` : line;
}

/** The line a tool call is shown as. */
export const toolCallLine = (c: { name: string; arguments: string; id: string }) => `  → ${c.name} ${brief(c.arguments, 160)}  [${c.id}]`;

/** The line a tool result is shown as. */
export function toolResultLine(r: Pick<ToolResultEntry, 'status' | 'isError' | 'name' | 'toolCallId' | 'content'>): string {
  const mark = r.status === 'ok' && !r.isError ? '✔' : r.status === 'interrupted' ? '?' : '✘';
  return `  ${mark} ${r.name} [${r.toolCallId}] ${r.status === 'ok' ? '' : `${r.status}: `}${brief(r.content, 300)}`;
}

/**
 * Live output of agent runs: committed entries (model turns, tool calls, results, approvals,
 * interruptions) as they commit, plus streamed model text before its turn commits. Human lines
 * go to stderr so stdout stays the answer; with --json, one JSON object per event on stdout.
 */
export function agentPrinter(json: boolean) {
  const streamed = new Set<string>();
  // Streamed model text is written as it comes, each line cut at the cap (the count follows it).
  const live = new LiveLineCap();
  let midLine = false;
  const out = (s: string) => {
    if (midLine) process.stderr.write(`${live.end()}\n`);
    midLine = false;
    // Model text and tool output are outside text: no control character reaches the terminal, and no line is unbounded.
    process.stderr.write(`${capLines(s).map(escapeControl).join('\n')}\n`);
  };
  return {
    live(e: AgentLiveEvent) {
      if (json || e.type !== 'model-delta') return;
      streamed.add(`${e.runId}:${e.turn}`);
      process.stderr.write(escapeControl(live.pass(e.text)));
      midLine = !e.text.endsWith('\n');
    },
    entry(e: Entry) {
      if (json) {
        process.stdout.write(`${JSON.stringify({ event: 'entry', runId: e.runId, kind: e.kind, body: e.body })}\n`);
        return;
      }
      switch (e.kind) {
        case ENTRY.user:
          return out(`you: ${(e.body as { text: string }).text}`);
        case ENTRY.model: {
          const m = e.body as unknown as ModelEntry;
          const key = `${e.runId}:${m.turn}`;
          if (m.content && !streamed.has(key)) out(`model: ${m.content}`);
          else if (midLine) out('');
          streamed.delete(key);
          for (const c of m.toolCalls) out(toolCallLine(c));
          return;
        }
        case ENTRY.toolResult: {
          return out(toolResultLine(e.body as unknown as ToolResultEntry));
        }
        case ENTRY.interruption: {
          const i = e.body as unknown as InterruptionEntry;
          return out(`  ⚠ model request ${i.attempt} of turn ${i.turn} did not finish (${i.code}); it will be retried${i.partialText ? ` (discarded ${i.partialText.length} streamed characters)` : ''}`);
        }
        case ENTRY.approvalRequested: {
          const a = e.body as unknown as ApprovalRequestedEntry;
          return out(
            `  ⏸ ${a.tool} [${a.toolCallId}] needs approval ${a.approvalId} (digest ${a.digest}, expires ${new Date(a.expiresAt).toISOString()})\n` +
              `    approve: berth approve ${e.runId} ${a.toolCallId}    deny: berth deny ${e.runId} ${a.toolCallId}`,
          );
        }
        case ENTRY.approvalDecided: {
          const d = e.body as { approvalId: string; decision: string; by: string };
          return out(`  approval ${d.approvalId}: ${d.decision} (${d.by})`);
        }
      }
    },
    state(runId: string, state: string, reason: string) {
      if (json) process.stdout.write(`${JSON.stringify({ event: 'run', runId, state, reason })}\n`);
      else out(`  run ${runId}: ${state}${reason ? ` (${reason})` : ''}`);
    },
  };
}
