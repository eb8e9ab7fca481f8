/** What the distributed test files share. Whether they run: see global-setup.ts. */
import { restateServerBinary } from './server.js';

/** The server binary; the files skip without it (global-setup.ts says so once). */
export const SERVER_BINARY = restateServerBinary();

export interface ToolLine {
  key: string;
  line: string;
  pid: number;
  /** The session's memory scope the tool was told, when it has one. */
  scope?: string | undefined;
}

/** The append tool's log: one line per execution of a side effect. */
export function readToolLog(text: string): ToolLine[] {
  return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as ToolLine);
}

