export { decideAcceptanceOnce } from './decide-once';
export { acceptanceOf, decideAcceptance, type AcceptanceView, type DecideAcceptance } from './acceptance';
