import type { Logger } from 'pino';
import { builtinTools, hostTools, type AnyTool } from '../../tools';
import type { DocumentTypes, HandlerRegistry, Kernel } from '../kernel';
import { RunSandbox } from '../run-sandbox';
import type { SandboxHost } from '../sandbox';
import type { Snapshotter, SnapshotTransport } from '../snapshot';
import type { Store } from '../store';
import type { Clock } from '../support';
import type { AgentDeps, AgentLiveEvent } from './agent-deps';
import { AgentSandbox } from './agent-sandbox';
import { approvalTimerHandler } from './approval-timer';
import { generationHandler } from './generation-task';
import { openAiChatClient, readApiKey, type ChatClient, type ModelConfig } from './model';
import { callerDrivenChatClient, isCallerDriven } from './model/caller-driven';
import { agentRootHandler } from './root-task';
import { toolHandler } from './tool-task';

export interface RegisterAgentOptions {
  registry: HandlerRegistry;
  documents: DocumentTypes;
  kernel: Kernel;
  store: Store;
  sandbox: SandboxHost;
  snapshots: Snapshotter;
  clock: Clock;
  logger: Logger;
  /** Tools besides the built-ins (same name replaces a built-in). */
  tools?: AnyTool[];
  /** Replaces the `openai` client, e.g. in unit tests of pure logic. */
  chatClient?: (cfg: ModelConfig) => ChatClient;
  onLive?: (e: AgentLiveEvent) => void;
  /** Snapshots in an OCI registry, so a session continues on an engine that never saw it. */
  transport?: SnapshotTransport;
}

/**
 * Registers the agent task kinds (root, generation, tool, approval timer) on a host's registry,
 * so every host process can resume agent runs. The plan runs' sandbox document type must be
 * registered already (the host runtime does it): the session's sandbox pointer uses it.
 */
export function registerAgent(o: RegisterAgentOptions) {
  // Tool-time snapshots never move the session to a new container (rebase), so the only writer of
  // the sandbox pointer while tools run is a restore, and tool commits cannot conflict on it.
  const plan = new RunSandbox({ store: o.store, sandbox: o.sandbox, snapshots: o.snapshots, clock: o.clock, logger: o.logger, rebaseBytes: Number.POSITIVE_INFINITY, transport: o.transport });
  const tools = new Map<string, AnyTool>([...builtinTools, ...hostTools, ...(o.tools ?? [])].map((t) => [t.name, t]));
  const deps: AgentDeps = {
    store: o.store,
    sandbox: new AgentSandbox({ store: o.store, plan, clock: o.clock, logger: o.logger }),
    clock: o.clock,
    logger: o.logger,
    tools,
    chatClient: o.chatClient ?? ((cfg) => (isCallerDriven(cfg) ? callerDrivenChatClient() : openAiChatClient({ baseUrl: cfg.baseUrl, apiKey: () => readApiKey(cfg) }))),
    kernel: () => o.kernel,
    onLive: o.onLive,
  };
  for (const h of [agentRootHandler(deps), generationHandler(deps), toolHandler(deps), approvalTimerHandler(deps)]) o.registry.register(h);
  return { deps, plan, tools };
}
