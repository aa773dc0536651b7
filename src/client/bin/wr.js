#!/usr/bin/env node
// The `wr` command: registers tsx (a dependency) and runs the TypeScript entry, so no build step is
// needed; works on Node 20 and later.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
