/** What a build step reports while it works; `step` is stable, `message` is for people. */
export interface BuildProgress {
  name: string;
  step: 'hash' | 'reuse' | 'rootfs' | 'layer' | 'archive' | 'load' | 'tag' | 'done';
  message: string;
}

/** What a definition's rootfs builder may use. */
export interface RootfsContext {
  signal: AbortSignal;
  progress: (message: string) => void;
}

/**
 * One sandbox image: how to fill an empty directory with its root filesystem, and what else
 * (beyond the files in its folder) decides the bytes of that filesystem.
 */
export interface ImageDefinition {
  name: string;
  /** The folder holding this definition's files; every file in it feeds the definition hash. */
  folder: string;
  cmd: string[];
  /**
   * Layer mtimes: `zero` sets every entry to the epoch; a number clamps newer entries to that
   * SOURCE_DATE_EPOCH and keeps older package mtimes (Python's .pyc checks compare them).
   */
  mtime: 'zero' | number;
  /** Host facts that change the rootfs bytes without changing any file of the definition. */
  hashInputs(signal: AbortSignal): Promise<string[]>;
  /** Fills `dir` (empty, owned by root, mode 0755) with the root filesystem. */
  buildRootfs(dir: string, ctx: RootfsContext): Promise<void>;
}
