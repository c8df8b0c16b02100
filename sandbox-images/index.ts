export { buildImage, type BuildImageOptions, type BuiltImage } from './build-image';
export type { BuildProgress } from './definition';
export { imageDefinitions } from './definitions';
