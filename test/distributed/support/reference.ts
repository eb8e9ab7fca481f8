/** The same sessions in one process on the SQLite store: what every Restate transcript must equal. */
import { join } from 'node:path';
import { DurableSession, type Message } from '../../../src/index.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { fixtureMachine } from '../fixtures/agent.js';

/** Runs each session's prompts in order (sessions concurrently) and returns their transcripts. */
export async function referenceTranscripts(dir: string, sessions: ReadonlyMap<string, readonly string[]>): Promise<Map<string, Message[]>> {
  const store = new SqliteSessionStore({ path: join(dir, 'reference.db') });
  const machine = fixtureMachine({ toolLog: join(dir, 'reference-tools.log'), maxDelayMs: 2 });
  try {
    const entries = await Promise.all(
      [...sessions].map(async ([sessionId, prompts]) => {
        const session = await DurableSession.open({ machine, store, sessionId });
        for (const message of prompts) {
          session.send({ type: 'input', message });
          await session.whenIdle();
        }
        const history = session.actor.getSnapshot().context.brain.context.history;
        await session.close();
        return [sessionId, history] as const;
      }),
    );
    return new Map(entries);
  } finally {
    await store.close();
  }
}
