export { scrub, scrubDeep, secretForms, base64Core, redactedMarker, StreamScrubber, type ScrubSecret } from './scrub';
export { ScrubbedStream } from './scrubbed-stream';
export { scrubError } from './scrub-error';
export { resolveSecrets, checkSecretGrants, hostSecretSource, type ResolvedSecret, type SecretDecl, type SecretSource } from './resolve';
export { checkSecretTargets, type SecretConsumers } from './targets';
export { withSecrets, removeStaleSecretFiles, SECRET_DIR, type SecretExecTarget } from './expose';
export { LOG_REDACT_PATHS } from './log-redact';
export { checkSnapshotSecrets, findSecretsInChanges, fileForms, SECRET_MATERIAL_LABEL, type SecretHit, type SnapshotCheckLease } from './snapshot-check';
export { checkArtifactSecrets } from './artifact-check';
