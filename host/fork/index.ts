export { forkPlanRun, planFork, submitFork, checkForkPlan, type PlannedFork, type ForkDeps, type ForkOptions } from './submit-fork';
export { resolvePlanForkPoint, forkIndexOf, forkable, type ForkPoint } from './fork-point';
export { forkedFrom, forkPointsInUse, forksOf, lineageOf, planInputOf, type ForkedFrom, type LineageNode } from './lineage';
export { removeFinishedForks, type CollectedFork, type ForkGcDeps } from './fork-gc';
export { forkSession, type SessionForkDeps } from './session-fork';
