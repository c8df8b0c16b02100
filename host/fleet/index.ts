export { Worker, type WorkerOptions } from './worker';
