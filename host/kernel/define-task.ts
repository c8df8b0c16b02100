import type { z } from 'zod';
import { BerthError } from '../errors';
import type { Json, TaskError } from '../model';
import type { Decision, PhaseContext, TaskHandler } from './handler';

/**
 * A phase context whose input (`value`) and checkpoint (`state`) have been parsed by the kind's
 * schemas before the phase runs. `state` is `undefined` only in the initial phase of a task that
 * has committed no checkpoint yet (stored as `null`).
 */
export interface TypedPhaseContext<I, C = Json> extends PhaseContext {
  readonly value: I;
  readonly state: C;
}

/** A decision whose checkpoint and result are the kind's own types (validated before commit). */
export type TypedDecision<C, R> = Decision extends infer D
  ? D extends { type: 'complete' | 'interrupt' }
    ? Omit<D, 'result'> & { result?: R }
    : D extends { type: 'next' | 'sleep' | 'spawn' | 'await' }
      ? Omit<D, 'checkpoint'> & { checkpoint?: C }
      : D
  : never;

/**
 * One task kind: its schemas (the source of truth for what it stores) and its phases. Every other
 * {@link TaskHandler} field (accepts, restartLimit, maxRetries and any later hook) is taken as is.
 */
export interface TaskKindDefinition<I, C = Json, R = Json> extends Omit<TaskHandler, 'version' | 'phases'> {
  /** Default 1. Bump it when phases change meaning; list older versions in `accepts` if the new code continues them. */
  version?: number;
  input: z.ZodType<I>;
  /** The shape of every checkpoint the kind commits (and reads back). Without it, `state` is the raw JSON. */
  checkpoint?: z.ZodType<C>;
  /** The shape of the result a `complete` (or `interrupt`) commits. Without it, any JSON. */
  result?: z.ZodType<R>;
  phases: Record<string, (ctx: TypedPhaseContext<I, C>) => Promise<TypedDecision<C, R>>>;
  /**
   * Parse each task's input once and reuse it at its later phases (a task's input never changes
   * after it is created). For kinds whose input is large (a plan root holds every step of a run
   * thousands of steps long) and whose phases never change `ctx.value`; the value is shared.
   */
  cacheInput?: boolean;
}

/** Parsed inputs of `cacheInput` kinds, by task id: the most recently used few, enough for the tasks a host drives at once. */
const INPUT_CACHE_SIZE = 64;

/**
 * A task kind for the kernel's registry, parsed at the phase boundary: before a phase runs, its
 * stored input and checkpoint are parsed (a shape that drifted fails the task with `input_invalid`
 * or `checkpoint_invalid`, naming the kind, phase and field, instead of reaching phase code as
 * `undefined`); before the decision commits, its checkpoint and a `complete`'s result are parsed
 * too (`checkpoint_invalid` / `result_invalid`), and what the schemas produce is what is stored.
 */
export function defineTask<I, C = Json, R = Json>(def: TaskKindDefinition<I, C, R>): TaskHandler {
  const phases: TaskHandler['phases'] = {};
  const inputs = new Map<string, I>();
  const parseInput = (ctx: PhaseContext): z.ZodSafeParseResult<I> => {
    if (!def.cacheInput) return def.input.safeParse(ctx.input);
    const kept = inputs.get(ctx.task.id);
    if (kept !== undefined) {
      // Most recently used last, so the oldest goes first when the cache is full.
      inputs.delete(ctx.task.id);
      inputs.set(ctx.task.id, kept);
      return { success: true, data: kept } as z.ZodSafeParseResult<I>;
    }
    const parsed = def.input.safeParse(ctx.input);
    if (parsed.success) {
      inputs.set(ctx.task.id, parsed.data);
      if (inputs.size > INPUT_CACHE_SIZE) inputs.delete(inputs.keys().next().value!);
    }
    return parsed;
  };
  for (const [name, phase] of Object.entries(def.phases)) {
    phases[name] = async (ctx) => {
      const input = parseInput(ctx);
      if (!input.success) return { type: 'fail', error: invalid('input_invalid', def.kind, name, 'input', input.error) };
      let state: unknown = ctx.checkpoint;
      // A task's first phase has no checkpoint yet (null); every later one reads what a phase committed.
      if (def.checkpoint && !(name === def.initialPhase && ctx.checkpoint === null)) {
        const cp = def.checkpoint.safeParse(ctx.checkpoint);
        if (!cp.success) return { type: 'fail', error: invalid('checkpoint_invalid', def.kind, name, 'checkpoint', cp.error) };
        state = cp.data;
      } else if (def.checkpoint) {
        state = undefined;
      }
      const typed = Object.assign(Object.create(ctx) as PhaseContext, { value: input.data, state }) as TypedPhaseContext<I, C>;
      return checked(def, name, (await phase(typed)) as Decision);
    };
  }
  // Hooks and limits pass through unchanged, so a field the kernel adds to TaskHandler needs no change here.
  const { input: _input, checkpoint: _checkpoint, result: _result, phases: _phases, cacheInput: _cache, version, ...rest } = def;
  return { ...rest, version: version ?? 1, phases };
}

/** The decision with its checkpoint and result as the schemas produced them, or a failure naming what is wrong. */
function checked<I, C, R>(def: TaskKindDefinition<I, C, R>, phase: string, d: Decision): Decision {
  if (def.checkpoint && 'checkpoint' in d && d.checkpoint !== undefined) {
    const cp = def.checkpoint.safeParse(d.checkpoint);
    if (!cp.success) return { type: 'fail', error: invalid('checkpoint_invalid', def.kind, phase, 'new checkpoint', cp.error) };
    d = { ...d, checkpoint: cp.data as Json };
  }
  if (def.result && (d.type === 'complete' || d.type === 'interrupt') && d.result !== undefined) {
    const r = def.result.safeParse(d.result);
    if (!r.success) return { type: 'fail', error: invalid('result_invalid', def.kind, phase, 'result', r.error) };
    d = { ...d, result: r.data as Json };
  }
  return d;
}

function invalid(code: string, kind: string, phase: string, what: string, error: z.ZodError): TaskError {
  const fields = error.issues.map((i) => i.path.join('.') || `(${what})`);
  const problems = error.issues.map((i) => `${i.path.join('.') || `(${what})`}: ${i.message}`).join('; ');
  return { code, message: `${kind} ${what} in phase ${phase}: ${problems}`, details: { kind, phase, fields } };
}

/**
 * Another task's stored input, checkpoint or result, parsed by the schema of the kind that wrote it
 * (a parent reading its child's result, a child its root's input). A shape that drifted throws a
 * non-retryable `input_invalid` / `checkpoint_invalid` / `result_invalid` naming task and fields.
 */
export function storedValue<T>(schema: z.ZodType<T>, value: unknown, of: { what: 'input' | 'checkpoint' | 'result'; kind: string; taskId: string; readBy?: string }): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.') || `(${of.what})`}: ${i.message}`).join('; ');
  const by = of.readBy ? ` (read by task ${of.readBy})` : '';
  throw new BerthError(`${of.what}_invalid`, `${of.kind} task ${of.taskId} ${of.what}${by}: ${problems}`, { ids: { taskId: of.taskId } });
}
