export { type Clock, systemClock } from './clock';
export { newId } from './ids';
export { faultPoint } from './faults';
