import type { Logger } from 'pino';
import type { AnyTool } from '../../tools';
import { storedValue, type Kernel } from '../kernel';
import type { Task } from '../model';
import type { Store } from '../store';
import type { Clock } from '../support';
import { BerthError } from '../errors';
import { AgentRunInputSchema, type AgentRunInput } from './agent-input';
import type { AgentSandbox } from './agent-sandbox';
import type { ChatClient, ModelConfig } from './model';

/** Live happenings of agent runs that are not (yet) committed: streamed text and command output. */
export type AgentLiveEvent =
  | { type: 'model-delta'; runId: string; turn: number; text: string }
  | { type: 'tool-output'; runId: string; toolCallId: string; stream: 'stdout' | 'stderr'; text: string };

/** What the agent task kinds run on; built once per host process by {@link registerAgent}. */
export interface AgentDeps {
  store: Store;
  sandbox: AgentSandbox;
  clock: Clock;
  logger: Logger;
  /** Tools by name: the built-ins and any an application added. */
  tools: Map<string, AnyTool>;
  /** The client for one model configuration (the key is read from its env var per request). */
  chatClient(cfg: ModelConfig): ChatClient;
  /** The kernel's outside-signal delivery; set once the kernel exists. */
  kernel: () => Kernel;
  onLive?: (e: AgentLiveEvent) => void;
}

const cache = new Map<string, AgentRunInput>();

/** The run's settings and environment, from its root task (immutable, so cached by run id). */
export async function runInputOf(store: Store, task: Task): Promise<AgentRunInput> {
  const runId = task.runId;
  if (!runId) throw new BerthError('agent_corrupt', `task ${task.id} belongs to no run`, { ids: { taskId: task.id } });
  const hit = cache.get(runId);
  if (hit) return hit;
  const run = await store.getRun(runId);
  const root = run?.rootTaskId ? await store.getTask(run.rootTaskId) : undefined;
  if (!root) throw new BerthError('agent_corrupt', `run ${runId} has no root task`, { ids: { runId, taskId: task.id } });
  // Parsed as the root's kind parses it: a drifted stored shape is named here, not met as `undefined` later.
  const input = storedValue(AgentRunInputSchema, root.input, { what: 'input', kind: root.kind, taskId: root.id, readBy: task.id });
  // A long-lived host sees many runs; the cache only saves a read or two, so it is simply reset.
  if (cache.size >= 256) cache.clear();
  cache.set(runId, input);
  return input;
}

/** The tools an agent run may call, in its settings' order. */
export function toolsOf(deps: Pick<AgentDeps, 'tools'>, input: AgentRunInput): Map<string, AnyTool> {
  const names = input.settings.tools ?? [...deps.tools.values()].filter((t) => t.offeredByDefault !== false).map((t) => t.name);
  return new Map(names.flatMap((n) => (deps.tools.has(n) ? [[n, deps.tools.get(n)!] as const] : [])));
}
