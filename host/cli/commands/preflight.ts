export { checkImageOnEngine, checkPlanSecrets } from '../../api/preflight';
