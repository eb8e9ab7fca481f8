/**
 * A command line the CLI (and the demo) suggests, written one way everywhere: through npx, which
 * runs the package's own `loopchart` in a project that installed it and in this repository alike,
 * so a hint pasted as printed runs without a global install.
 */
export const cliHint = (args: string): string => `npx loopchart ${args}`;
