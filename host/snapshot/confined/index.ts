export { ConfinedTree } from './resolver';
export { hashConfined, readConfined } from './hash-file';
export { ReadBudget, DEFAULT_READ_BOUNDS, boundError, type ReadBounds, type BoundName } from './bounds';
export { nameString, nameBytes, hasEscapedBytes } from './names';
export { openConfinedRoot, openDirAt, openFileAt, lstatAt, readdirAt, readlinkAt, closeDir, O_PATH, type ConfinedDir } from './confined-dir';
