export { acceptanceOf, decideAcceptance, type AcceptanceView, type DecideAcceptance } from './acceptance';
