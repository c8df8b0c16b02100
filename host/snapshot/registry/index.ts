export { SnapshotTransport, SNAPSHOT_REPOSITORY, type RegistryCalls, type PushTarget, type Fetched } from './transport';
