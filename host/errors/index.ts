export { BerthError, isBerthError, type ErrorIds } from './berth-error';
