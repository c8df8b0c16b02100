export { type Clock, systemClock } from './clock';
export { idTimeMs, newId } from './ids';
export { faultError, faultHold, faultPoint } from './faults';
export { linkSignals } from './linked-signal';
