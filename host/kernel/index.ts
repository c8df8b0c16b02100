export type {
  SpawnSpec,
  EntryWrite,
  DocumentWrite,
  EffectIntent,
  PhaseWrites,
  Decision,
  PerformOutcome,
  PerformSpec,
  PhaseContext,
  Phase,
  TaskHandler,
} from './handler';
export { HandlerRegistry } from './registry';
export { DocumentTypes, type DocumentType, BASELINE_EVERY } from './documents';
export { Kernel, type KernelOptions, type CommitEvent } from './kernel';
export { submit, type SubmitInput, type Submitted } from './submit';
export { applyDecision, type ResolvedSpawn, type DecisionEffect } from './decide';
export { runTransitionsForRoot } from './run-outcome';
export { defineTask, storedValue, type TaskKindDefinition, type TypedPhaseContext, type TypedDecision } from './define-task';
