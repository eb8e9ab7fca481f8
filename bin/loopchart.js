#!/usr/bin/env node
// The `loopchart` command. In a checkout of the repository (src/ beside this folder) it runs the
// TypeScript source through tsx, so `npx loopchart` needs no build and is never stale; in the
// installed package it runs the build.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { tsImport } = await import('tsx/esm/api');
  await tsImport(source.href, import.meta.url);
} else {
  await import('../dist/cli.js');
}
