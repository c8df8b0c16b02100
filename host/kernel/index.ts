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
  Verdict,
  EffectVerifier,
} from './handler';
export { ActionError, notSent, rejected, withDelivery, deliveryOf, classifyFetchError, httpAnswerError, type Delivery } from './delivery';
export { OperatorReceipt, operatorReceipt, isOperatorReceipt } from './operator-receipt';
export { cancelRecord, type CancelPoint } from './cancel-record';
export { reconcileEffects, waitAfterReconcile, type EffectsReconciled, type ReconcileDeps } from './reconcile-effects';
export { HandlerRegistry } from './registry';
export { DocumentTypes, type DocumentType, BASELINE_EVERY } from './documents';
export { Kernel, type KernelOptions, type CommitEvent } from './kernel';
export { deliverAsOperator } from './idle-transitions';
export { SessionOwners, ownerGone, sessionScope, DEFAULT_OWNERSHIP, type SessionLost, type SessionOwnershipOptions } from './session-owners';
export { submit, type SubmitInput, type Submitted } from './submit';
export { applyDecision, type ResolvedSpawn, type DecisionEffect } from './decide';
export { runTransitionsForRoot } from './run-outcome';
export { defineTask, storedValue, type TaskKindDefinition, type TypedPhaseContext, type TypedDecision } from './define-task';
