export { Worker, type WorkerOptions } from './worker';
export { PlacementCheck, type Placement } from './placement';
export { releaseDrainedSandboxes, type DrainedSession } from './drain-sandboxes';
export { livenessOf, type WorkerLiveness } from './liveness';
