#!/usr/bin/env node
// The `berth` command: loads the TypeScript sources through tsx, then runs the CLI.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
