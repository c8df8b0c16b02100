export { EnvironmentSchema, type Environment } from './schema';
export { parseEnvironment, loadEnvironment, parseWithSchema } from './parse';
export { canonicalJson, fingerprint } from './fingerprint';
export { withImageDigest } from './lock';
export { checkSupported, requireLocked } from './checks';
export { satisfiesRange, isRange, isVersion } from './semver-range';
export { environmentJsonSchema, JSON_SCHEMA_FILE } from './json-schema';
export type { ManifestIssue } from './issues';
export type { ManifestFormat } from './read-document';
