export { RECORD_FORMAT, RECORD_SCHEMA_VERSION, RunRecordSchema, ContractFieldsSchema, type ContractFields, type RunRecord } from './schema';
export { canonicalJson, environmentCanonical, recordDigest, sealRecord, sha256 } from './canonical';
export { exportRun, readRunRows, INLINE_LIMIT } from './build-record';
export { exportRunToFile } from './stream-record';
export { contractFields, registeredPolicies, type HandlerPolicies, type HandlerPolicy } from './contract-fields';
export { verifyRecord, importRecord, recordRows } from './import-record';
export { checkRecord, INVARIANTS, type InvariantName, type Violation } from './invariants';
export { checkStore, assertDrivable, type UnreadableRun } from './check-store';
export { runRecordJsonSchema, RECORD_JSON_SCHEMA_FILE } from './json-schema';
