import type Dockerode from 'dockerode';
import { buildContext, ENTRY, sessionSandboxDocId, type ModelEntry, type SandboxState, type ToolResultEntry, type ToolTaskResult } from '../../host/agent';
import { builtinTools } from '../../tools';
import { openStore } from '../../host/store';
import { unlessPaused } from '../../host/sandbox/paused-wait';
import type { Task } from '../../host/model';

/** An agent run as crash tests compare it: what must not depend on where (or whether) the host died. */
export interface ObservedAgentRun {
  runState: string;
  users: string[];
  models: ModelEntry[];
  /** By tool call id: results commit in any order when a turn has several calls. */
  results: Record<string, Pick<ToolResultEntry, 'name' | 'status' | 'isError' | 'content'>>;
  /** Effect status by tool call id. */
  effects: Record<string, { status: string; replay: string; attempts: number }>;
  workspaceDigest: string | null;
  /** What the model would read next: tool messages by call id, rebuilt from the entries. */
  context: Record<string, string>;
  containerId: string | null;
}

/** Reads a finished agent run's record from a store file. */
export async function observeAgentRun(db: string): Promise<ObservedAgentRun> {
  const store = await openStore(db);
  try {
    const [run] = await store.listRuns();
    const entries = await store.listEntries(run!.sessionId);
    const results: ObservedAgentRun['results'] = {};
    for (const e of entries.filter((x) => x.kind === ENTRY.toolResult)) {
      const b = e.body as unknown as ToolResultEntry;
      results[b.toolCallId] = { name: b.name, status: b.status, isError: b.isError, content: b.content };
    }
    const tasks = await store.listTasks({ runId: run!.id });
    const callOf = new Map(tasks.map((t: Task) => [t.id, (t.input as { toolCallId?: string }).toolCallId]));
    const effects: ObservedAgentRun['effects'] = {};
    for (const e of await store.listEffects({ runId: run!.id })) effects[callOf.get(e.taskId!) ?? e.id] = { status: e.status, replay: e.replay, attempts: e.attempts };
    let latest: SandboxState | null = null;
    for (const t of tasks) {
      const s = (t.result as unknown as ToolTaskResult | null)?.sandbox;
      if (s && (!latest || s.measuredAt > latest.measuredAt)) latest = s;
    }
    const pointer = await store.getDocument(sessionSandboxDocId(run!.sessionId));
    const leaseId = pointer ? ([pointer.baseline, ...pointer.ops.map((o) => o.op)] as Array<{ leaseId?: string } | null>).reduce<string | null>((id, op) => op?.leaseId ?? id, null) : null;
    const lease = leaseId ? await store.getLease(leaseId) : undefined;
    const context: Record<string, string> = {};
    const tools = new Map(builtinTools.map((t) => [t.name, t]));
    for (const m of buildContext(entries, { systemPrompt: '', tools, compaction: { keepRecentTurns: 100, oldOutputChars: 100_000 } })) {
      if (m.role === 'tool') context[m.tool_call_id] = m.content;
    }
    return {
      runState: run!.state,
      users: entries.filter((e) => e.kind === ENTRY.user).map((e) => (e.body as { text: string }).text),
      models: entries.filter((e) => e.kind === ENTRY.model).map((e) => e.body as unknown as ModelEntry),
      results,
      effects,
      workspaceDigest: latest?.workspaceDigest ?? null,
      context,
      containerId: lease?.containerId ?? null,
    };
  } finally {
    await store.close();
  }
}

/** A file of a container (outside the workspace too), read with a plain exec; '' when absent. */
export function readContainerFile(docker: Dockerode, containerId: string, path: string): Promise<string> {
  return containerStdout(docker, containerId, ['cat', path]);
}

/** The stdout of a plain exec in a container (as its default user), bypassing Berth. */
export async function containerStdout(docker: Dockerode, containerId: string, cmd: string[]): Promise<string> {
  // A snapshot commit pauses the container for a moment; the probe waits for it like the host does.
  const container = docker.getContainer(containerId);
  const stream = await unlessPaused(container, async () => (await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true })).start({}));
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  // Multiplexed frames: 8-byte header (stream, 0, 0, 0, size32) then the payload.
  const all = Buffer.concat(chunks);
  let out = '';
  for (let i = 0; i + 8 <= all.length; ) {
    const size = all.readUInt32BE(i + 4);
    if (all[i] === 1) out += all.subarray(i + 8, i + 8 + size).toString('utf8');
    i += 8 + size;
  }
  return out;
}
