/**
 * The public API for applications that add their own durable task kinds and documents: the same
 * phases, commits, subtasks, waits and effect records the agent's own tasks use.
 *
 * ```ts
 * const send = defineTask({ kind: 'send-notice', input: z.object({ to: z.string() }), initialPhase: 'send',
 *   phases: { send: async (ctx) => { const r = await ctx.perform({...}, act); return { type: 'complete', result: r } } } });
 * const notify = extension('notify', { tasks: [send, ...], documents: [plan] });
 * createHostRuntime({ ..., extensions: [notify] })   // or createTaskHost({ store, extensions: [notify], ... })
 * ```
 */
import type { Logger } from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit, type Decision, type DocumentType, type EffectVerifier, type PhaseContext, type SpawnSpec, type Submitted, type TaskHandler } from '../kernel';
import type { Json, JoinPolicy, Task } from '../model';
import type { Store } from '../store';
import { newId, type Clock } from '../support';

export type { Decision, DocumentType, PhaseContext, SpawnSpec, TaskHandler, TaskKindDefinition, TypedPhaseContext, TypedDecision, EffectVerifier, Verdict, Delivery } from '../kernel';
/**
 * How an action says what its failure proves: `notSent` and `rejected` (not applied; retried with
 * backoff in `retry_wait` when retryable, else `failed`), `httpAnswerError` for a non-2xx answer,
 * `classifyFetchError` for what a `fetch` error proves. Anything else an action throws is taken as
 * "may have been received": verified, or left `unknown` for reconciliation, never `failed`.
 */
export { notSent, rejected, httpAnswerError, classifyFetchError, deliveryOf, ActionError, operatorReceipt, isOperatorReceipt, OperatorReceipt, reconcileEffects, waitAfterReconcile } from '../kernel';

/** Defined in the kernel (every task kind, the host's own included, is defined through it); re-exported as part of this API. */
export { defineTask } from '../kernel';

/** A typed, versioned document type (state and operations validated by zod on every write). */
export function defineDocument<S extends Json, O extends Json>(def: DocumentType<S, O>): DocumentType<S, O> {
  return def;
}

/** A named set of task kinds and document types an application adds to a host. */
export interface Extension {
  name: string;
  tasks: TaskHandler[];
  documents: Array<DocumentType<any, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Lookups by effect kind, for effects left `unknown` (`berth reconcile RUN --verify`). */
  verifiers: Record<string, EffectVerifier>;
  register(target: { registry: HandlerRegistry; documents: DocumentTypes }): void;
}

export function extension(name: string, parts: { tasks: TaskHandler[]; documents?: Extension['documents']; verifiers?: Record<string, EffectVerifier> }): Extension {
  const documents = parts.documents ?? [];
  const verifiers = parts.verifiers ?? {};
  return {
    name,
    tasks: parts.tasks,
    documents,
    verifiers,
    register(target) {
      for (const d of documents) target.documents.register(d);
      for (const [kind, v] of Object.entries(verifiers)) target.registry.registerVerifier(kind, v);
      for (const t of parts.tasks) target.registry.register(t);
    },
  };
}

/** One subtask per input, all created in the commit that starts the wait for them. */
export function spawnEach(kind: string, inputs: Json[], then: { phase: string; join?: JoinPolicy; checkpoint?: Json; writes?: Decision['writes'] }): Decision {
  const tasks: SpawnSpec[] = inputs.map((input) => ({ kind, input }));
  return { type: 'spawn', tasks, join: then.join ?? 'allSettled', phase: then.phase, ...(then.checkpoint === undefined ? {} : { checkpoint: then.checkpoint }), ...(then.writes ? { writes: then.writes } : {}) };
}

/** Owned subtasks with their outcomes and results, in spawn order. */
export async function childResults(ctx: PhaseContext): Promise<Array<Pick<Task, 'id' | 'kind' | 'outcome' | 'result' | 'error'>>> {
  return (await ctx.children()).map((c) => ({ id: c.id, kind: c.kind, outcome: c.outcome, result: c.result, error: c.error }));
}

export interface TaskHostOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  hostId: string;
  extensions: Extension[];
  concurrency?: number;
  pollMs?: number;
}

/**
 * A kernel with only the given extensions, for applications whose tasks need no sandbox. Start
 * it with `kernel.start()`; `start` submits a root task (the same request id returns the same run).
 */
export function createTaskHost(o: TaskHostOptions) {
  const registry = new HandlerRegistry();
  const documents = new DocumentTypes();
  const kernel = new Kernel({ store: o.store, registry, documents, clock: o.clock, logger: o.logger, hostId: o.hostId, concurrency: o.concurrency, pollMs: o.pollMs });
  for (const x of o.extensions) x.register({ registry, documents });
  return {
    kernel,
    registry,
    documents,
    start(root: { kind: string; input: Json; requestId?: string; runKind?: string }): Promise<Submitted> {
      return submit({ store: o.store, kernel, registry }, { requestId: root.requestId ?? newId('req'), runKind: root.runKind ?? root.kind, root: { kind: root.kind, input: root.input } });
    },
  };
}
