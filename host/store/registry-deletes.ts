/** A snapshot manifest this store deleted from its registry (after every snapshot naming it was pruned). */
export interface RegistryDelete {
  /** The manifest reference as the snapshot records name it: `host[:port]/repo@sha256:…`. */
  registryRef: string;
  deletedAt: number;
}

/**
 * Remote deletions of pruned snapshots' manifests: bookkeeping beside the snapshot records, not
 * session state, so not commits. What is still to delete is derived (pruned records whose manifest
 * no unpruned record names and that has no deletion here newer than its push), so a host that died
 * between pruning and deleting, or a registry that was down, leaves nothing lost: the next gc does it.
 */
export interface RegistryDeleteRecords {
  /** Every manifest deletion recorded, in no particular order. */
  listRegistryDeletes(): Promise<RegistryDelete[]>;
  /** Records that the registry no longer holds `registryRef` (deleted now, or found absent); a later deletion of the same manifest replaces the time. */
  recordRegistryDelete(registryRef: string, at: number): Promise<void>;
}
