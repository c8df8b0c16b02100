export { type Clock, systemClock } from './clock';
export { newId } from './ids';
export { faultError, faultPoint } from './faults';
