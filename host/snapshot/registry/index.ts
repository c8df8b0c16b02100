export { SnapshotTransport, SNAPSHOT_REPOSITORY, BASE_REPOSITORY, type RegistryCalls, type PushTarget, type Fetched } from './transport';
