export { PlanSchema, PlanStepSchema, PlanAcceptanceSchema, runSteps, type Plan, type PlanStep, type PlanAcceptance } from './plan-schema';
export { loadPlan, type LoadedPlan } from './load-plan';
export { planHandlers, PLAN_KIND, STEP_KIND } from './handlers';
export { submitPlan } from './submit-plan';
export { PlanRunInputSchema } from './plan-input';
export { stepEffectId } from './checkpoints';
export type { PlanRunInput, PlanRootCheckpoint, StepInput, StepResult, PlanProgress } from './plan-input';
