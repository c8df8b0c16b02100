import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type CompactionEntry, type ToolResultEntry } from '../../host/agent';
import { cliWorld, SECRET, type CliWorld } from '../support/agent-cli-world';
import { BIG } from '../support/agent-long-script';
import { runNode } from '../support/child';
import { turnFromCallIds, type RecordedRequest, type ScriptedTurn } from '../support/model-server';
import { bundledCli, lastJson } from '../support/plan-fixture';

/**
 * Issue 32, "show it works": a 300-turn agent session (the real `openai` client against the
 * scripted OpenAI-compatible server on loopback) completes within a small window, killed
 * (SIGKILL) in its middle and resumed, and a fork at its middle asks the model exactly what the
 * original asked. The session is two runs: `berth agent` reads big.txt (1.5 KB) up to turn
 * TURNS/2, then `berth chat` up to turn TURNS; the chat is killed halfway and resumed, and a fork
 * after the first run sends the same chat. The full size is 300 turns (a few minutes); CI runs a
 * sampled size unless BERTH_LONG_AGENT_TURNS says otherwise, and the test's name says which ran.
 */
const FULL = 300;
const TURNS = Number(process.env.BERTH_LONG_AGENT_TURNS ?? 40);
const HALF = Math.floor(TURNS / 2);
const SIZE = TURNS >= FULL ? `${TURNS}-turn` : `${TURNS}-turn (SAMPLED; BERTH_LONG_AGENT_TURNS=${FULL} runs the full size)`;
if (TURNS < FULL) console.warn(`agent-length.test.ts: ${TURNS} turns, not the issue's ${FULL}: set BERTH_LONG_AGENT_TURNS=${FULL} for the full size`);

/** Turn 0 writes big.txt; every turn up to the newest user message's `until turn N` reads it back; then an answer. Depends only on the request, so a resumed host and a fork get the same answers. */
function untilScript(_turn: number, body: RecordedRequest['body']): ScriptedTurn {
  const turn = turnFromCallIds(body);
  const task = String(body.messages.findLast((m) => m.role === 'user')!.content);
  const until = Number(/until turn (\d+)/.exec(task)![1]);
  if (turn === 0) return { toolCalls: [{ name: 'write_file', arguments: { path: 'big.txt', content: BIG } }] };
  if (turn <= until) return { toolCalls: [{ name: 'read_file', arguments: { path: 'big.txt' }, id: `call_${turn}_0` }] };
  return { content: `read big.txt up to turn ${until}` };
}

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
}, 300_000);

/** `berth ARGS` with a bound for a long session on a loaded machine (the world's own is 3 minutes). */
async function berth(args: string[], env: Record<string, string> = {}) {
  return runNode(await bundledCli(), [...args, '--store', w!.store], { BERTH_HOST_ID: w!.hostId, BERTH_OPERATOR: 'tester', TEST_MODEL_KEY: SECRET, ...env }, 1_500_000);
}

const byTurn = (rs: RecordedRequest[]) => {
  const m = new Map<number, RecordedRequest['body'][]>();
  for (const r of rs) m.set(r.turn, [...(m.get(r.turn) ?? []), r.body]);
  return m;
};

/**
 * The session, the kill, the resume and the fork; `windowSetting` is the manifest's
 * `model.contextTokens` (none: the agent learns the window from the server's refusal).
 */
async function longSession(window: number, windowSetting: number | undefined) {
  w = await cliWorld(untilScript, { snapshotPolicy: 'after-each-step', server: { contextTokens: window, turnOf: turnFromCallIds } });
  const extra = ['--max-turns', String(TURNS + 5), ...(windowSetting ? ['--context-tokens', String(windowSetting)] : [])];
  const first = await berth([...w.agentArgs(`Read big.txt until turn ${HALF}.`, extra), '--json']);
  expect(first.code, first.stderr.slice(-3000)).toBe(0);
  const session = lastJson<{ run: { sessionId: string; state: string } }>(first).run.sessionId;
  expect(w.model.requests.filter((r) => !r.overflow).length).toBe(HALF + 2);

  // The second half, killed in its middle (a real SIGKILL of the host process), then resumed.
  const mark = w.model.requests.length;
  const chatText = `Read big.txt until turn ${TURNS}.`;
  const killed = await berth(['chat', session, chatText, '--max-turns', String(TURNS + 5), '--json'], { BERTH_FAULT: `after:phase.next:agent-generate#${Math.max(2, Math.floor(HALF / 2))}` });
  expect(killed.signal, killed.stderr.slice(-3000)).toBe('SIGKILL');
  const runId = await w.read(async (s) => (await s.listRuns()).find((r) => r.sessionId === session && r.state !== 'completed')!.id);
  const resumed = await berth(['resume', runId, '--json']);
  expect(resumed.code, resumed.stderr.slice(-3000)).toBe(0);
  expect((await w.read((s) => s.getRun(runId)))!.state).toBe('completed');
  const original = w.model.requests.slice(mark);

  // A fork after the first run, sent the same message, uninterrupted.
  const forked = await berth(['fork', session, '--at', '1', '--json']);
  expect(forked.code, forked.stderr.slice(-3000)).toBe(0);
  const fork = lastJson<{ sessionId: string }>(forked).sessionId;
  const forkMark = w.model.requests.length;
  const chat = await berth(['chat', fork, chatText, '--max-turns', String(TURNS + 5), '--json']);
  expect(chat.code, chat.stderr.slice(-3000)).toBe(0);
  const forkRequests = w.model.requests.slice(forkMark);

  // The fork asked once per turn; the killed-and-resumed original asked each turn exactly what the
  // fork asked (a turn in flight at the kill was asked twice, the same both times).
  expect(forkRequests.filter((r) => r.overflow)).toEqual([]);
  const forkTurns = byTurn(forkRequests);
  expect([...forkTurns.keys()]).toEqual(Array.from({ length: TURNS - HALF + 1 }, (_, i) => HALF + 1 + i));
  for (const bodies of forkTurns.values()) expect(bodies).toHaveLength(1);
  const originalTurns = byTurn(original);
  expect([...originalTurns.keys()]).toEqual([...forkTurns.keys()]);
  for (const [turn, bodies] of originalTurns) for (const b of bodies) expect(b, `turn ${turn}`).toEqual(forkTurns.get(turn)![0]);

  const served = w.model.requests.filter((r) => !r.overflow);
  expect(Math.max(...served.map((r) => r.promptTokens))).toBeLessThanOrEqual(window);
  const entries = await w.read((s) => s.listEntries(session));
  const compactions = entries.filter((e) => e.kind === ENTRY.compaction).map((e) => e.body as unknown as CompactionEntry);
  // Twelve reads fill the window: the session is compacted again and again.
  expect(compactions.length).toBeGreaterThan(TURNS / 12);
  // The store keeps every result whole (one write, TURNS reads), whatever the model was shown.
  const results = entries.filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
  expect(results).toHaveLength(TURNS + 1);
  for (const r of results.slice(1)) expect(r.content).toContain('line 059: the quick brown fox jumps');
  const check = await berth(['check', '--all', '--json']);
  expect(check.code, check.stdout.slice(-2000) + check.stderr.slice(-2000)).toBe(0);
  return w.model.requests;
}

describe('an agent session of any length', { timeout: 3_600_000 }, () => {
  it(`a ${SIZE} session with a 3,072-token window set in its settings completes, killed and resumed in its middle; a fork at its middle sends the very requests the original sent; berth check passes`, async () => {
    const requests = await longSession(3_072, 3_072);
    expect(requests.filter((r) => r.overflow)).toEqual([]);
  });

  it(`a ${SIZE} session against a server that refuses prompts over 4,096 tokens (llama.cpp's 400) with no window set learns the window once, completes, killed and resumed in its middle; a fork at its middle sends the very requests the original sent; berth check passes`, async () => {
    const requests = await longSession(4_096, undefined);
    // Refused once (the session failed at turn 59 and every later chat with it); never again, not after the resume, not in the fork.
    expect(requests.filter((r) => r.overflow)).toHaveLength(1);
  });
});
