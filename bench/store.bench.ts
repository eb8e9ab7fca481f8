/**
 * Session store benchmark: prints markdown tables (paste them into a closing note).
 *
 *   npx tsx bench/store.bench.ts            SQLite, memory and the raw baseline
 *   DATABASE_URL=postgres://… npx tsx bench/store.bench.ts   …and PostgreSQL
 *
 * What it shows: a step (append 2 messages + rewrite the state row) costs the same time and
 * the same bytes at log length 10 and 5,000 (ratio ≈ 1), how long restoring a 10,000-message
 * session takes, steps/second with 1 and 8 sessions stepping concurrently, and the store's
 * overhead over the same inserts written by hand with raw better-sqlite3 statements.
 * Every number is a median (of per-step times, or of repeated runs). Bytes are WAL bytes:
 * what a commit makes the database write before it returns (SQLite: WAL frames, whole pages;
 * PostgreSQL: pg_current_wal_lsn() movement); checkpoints write the pages again later.
 * Also exports `run()` for a bench runner.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { Message } from '../src/schemas.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import { PostgresSessionStore } from '../src/stores/postgres.js';
import type { SessionStore } from '../src/stores/session-store.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';

const STEPS = 400; // measured steps per log length
const WINDOW = 20; // steps per bytes measurement
const WARMUP = 100;
const RESTORE_LEN = 10_000;
const THROUGHPUT_STEPS = 400; // total steps per throughput run
const THROUGHPUT_RUNS = 5;

const USER_TEXT = 'Please look at the failing test in src/parser.ts and tell me why it breaks on empty input.';
const ASSISTANT_TEXT = 'The parser assumes at least one token. '.repeat(8);
/** About the size of the brain's state row without its history. */
const STATE = {
  version: 1,
  state: 'AwaitingModel',
  pending: [],
  pendingTools: [],
  turnsTaken: 12,
  contextTokens: 48_211,
  cancelled: false,
  lastCompactionTokens: null,
  deferredCompaction: false,
  totalToolCalls: 31,
  compactionReason: null,
  steering: [],
  outcome: null,
};

function stepMessages(i: number): Message[] {
  return [
    { role: 'user', content: `${USER_TEXT} (${i})` },
    { role: 'assistant', content: ASSISTANT_TEXT, toolCalls: [{ id: `call_${i}`, name: 'read_file', args: { path: 'src/parser.ts' } }] },
  ];
}
function history(length: number): Message[] {
  return Array.from({ length }, (_, i) => stepMessages(i)[i % 2]!);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const now = (): number => Number(process.hrtime.bigint()) / 1e3; // µs

/** Something that can take steps on one session and tell how many bytes hit storage. */
interface Subject {
  name: string;
  /** Creates `sessionId` with a log of `length` messages. */
  seed(sessionId: string, length: number): Promise<void>;
  step(sessionId: string, i: number): Promise<void>;
  /** Bytes written so far, or undefined when the subject has no storage to measure. */
  bytes?(): Promise<number>;
  /** Called after seeding, before the warm-up (vacuum, checkpoint). */
  settle?(): Promise<void>;
  /** Called before each measuring window (SQLite empties its WAL). */
  startWindow?(): Promise<void>;
  /** Loads the session; returns how many messages came back. */
  restore(sessionId: string): Promise<number>;
  close(): Promise<void>;
}

/** Drives a SessionStore the way the driver will: track the version, append, rewrite the state row. */
function storeSubject(name: string, store: SessionStore, extra: Partial<Subject> = {}): Subject {
  const versions = new Map<string, number>();
  return {
    name,
    async seed(sessionId, length) {
      versions.set(sessionId, await store.apply(sessionId, { expectedVersion: 0, state: STATE, append: history(length) }));
    },
    async step(sessionId, i) {
      const version = versions.get(sessionId)!;
      versions.set(sessionId, await store.apply(sessionId, { expectedVersion: version, state: { ...STATE, turnsTaken: i }, append: stepMessages(i) }));
    },
    async restore(sessionId) {
      return (await store.load(sessionId))!.messages.length;
    },
    close: () => store.close(),
    ...extra,
  };
}

/**
 * Bytes a SQLite commit writes = frames appended to the WAL. Each measuring window starts
 * from an empty WAL (a TRUNCATE checkpoint from a side connection) and stays far below the
 * 1000-page autocheckpoint, so the WAL's size at the end is exactly what the window wrote.
 */
function sqliteBytes(path: string): Pick<Subject, 'bytes' | 'startWindow' | 'settle'> {
  const checkpoint = () => {
    const db = new Database(path);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
  };
  return {
    async bytes() {
      try {
        return statSync(`${path}-wal`).size;
      } catch {
        return 0;
      }
    },
    async startWindow() {
      checkpoint();
    },
    async settle() {
      checkpoint();
    },
  };
}

/** The same writes by hand: prepared inserts + one UPDATE in BEGIN IMMEDIATE, no validation, no version check. */
function rawSqliteSubject(path: string, synchronous: 'FULL' | 'NORMAL'): Subject {
  const store = new SqliteSessionStore({ path, synchronous }); // only to create the same schema
  void store.close();
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  const insertSession = db.prepare(
    'INSERT INTO sessions (session_id, version, message_count, state, created_at, updated_at) VALUES (?, 1, ?, ?, ?, ?)',
  );
  const insertMessage = db.prepare('INSERT INTO messages (session_id, position, message) VALUES (?, ?, ?)');
  const update = db.prepare('UPDATE sessions SET version = version + 1, message_count = ?, state = ?, updated_at = ? WHERE session_id = ?');
  const selectLog = db.prepare('SELECT message FROM messages WHERE session_id = ? ORDER BY position').pluck();
  const counts = new Map<string, number>();
  const seed = db.transaction((sessionId: string, messages: Message[]) => {
    insertSession.run(sessionId, messages.length, JSON.stringify(STATE), Date.now(), Date.now());
    messages.forEach((m, i) => insertMessage.run(sessionId, i, JSON.stringify(m)));
  });
  const step = db.transaction((sessionId: string, i: number) => {
    const start = counts.get(sessionId)!;
    stepMessages(i).forEach((m, k) => insertMessage.run(sessionId, start + k, JSON.stringify(m)));
    update.run(start + 2, JSON.stringify({ ...STATE, turnsTaken: i }), Date.now(), sessionId);
    counts.set(sessionId, start + 2);
  });
  return {
    name: `raw better-sqlite3 (${synchronous})`,
    async seed(sessionId, length) {
      seed.immediate(sessionId, history(length));
      counts.set(sessionId, length);
    },
    async step(sessionId, i) {
      step.immediate(sessionId, i);
    },
    async restore(sessionId) {
      return (selectLog.all(sessionId) as string[]).map((text) => JSON.parse(text) as Message).length;
    },
    async close() {
      db.close();
    },
    ...sqliteBytes(path),
  };
}

async function postgresSubject(url: string, schema: string): Promise<Subject> {
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  const store = new PostgresSessionStore({ connectionString: url, schema, max: 8 });
  const lsn = async () => {
    const r = await admin.query<{ b: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS b");
    return Number(r.rows[0]!.b);
  };
  return storeSubject('postgres (pg Pool)', store, {
    bytes: lsn,
    async settle() {
      // VACUUM ANALYZE now, so autovacuum does not wake up on the seeded rows inside the
      // measured batch; then a checkpoint, so full-page images land in the warm-up.
      await admin.query(`VACUUM (ANALYZE) "${schema}".messages, "${schema}".sessions`);
      await admin.query('CHECKPOINT').catch(() => {});
    },
    async close() {
      await store.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  });
}

interface StepCost {
  us: number;
  bytes: number | undefined;
}

/**
 * Per-step cost of each subject at its log length. Every subject is fresh (one session in
 * empty tables, so the layout is the same at both lengths), and all of them (both lengths,
 * store and baseline) take their steps in turns: a slow patch of the disk or a busy
 * neighbour (fsync times vary a lot on shared machines) hits them all alike, so the ratios
 * hold even when the absolute numbers wander.
 */
async function stepCosts(subjects: Subject[], lengths: number[]): Promise<StepCost[]> {
  const id = (k: number) => `len${lengths[k]}`;
  for (const [k, subject] of subjects.entries()) {
    await subject.seed(id(k), lengths[k]!);
    await subject.settle?.();
    for (let i = 0; i < WARMUP; i++) await subject.step(id(k), i); // warm-up: JIT, plans, caches, full-page images
  }
  const times = subjects.map((): number[] => []);
  // Bytes are read around each step (so subjects sharing a server-wide WAL position do not
  // count each other) and summed per window of WINDOW steps; the median window wins: a
  // window still carries its share of page splits, while a burst from elsewhere (autovacuum
  // on a shared server) spoils one window, not the result.
  const windows = subjects.map((): number[] => []);
  const sums = subjects.map(() => 0);
  for (let i = 0; i < STEPS; i++) {
    if (i % WINDOW === 0) for (const subject of subjects) await subject.startWindow?.();
    for (const [k, subject] of subjects.entries()) {
      const before = await subject.bytes?.();
      const t = now();
      await subject.step(id(k), WARMUP + i);
      times[k]!.push(now() - t);
      const after = await subject.bytes?.();
      if (before !== undefined && after !== undefined) sums[k]! += after - before;
    }
    if ((i + 1) % WINDOW === 0) {
      for (const [k, subject] of subjects.entries()) {
        if (subject.bytes) windows[k]!.push(sums[k]! / WINDOW);
        sums[k] = 0;
      }
    }
  }
  return subjects.map((_, k) => ({ us: median(times[k]!), bytes: windows[k]!.length > 0 ? median(windows[k]!) : undefined }));
}

async function restoreMs(subjects: Subject[]): Promise<number[]> {
  for (const subject of subjects) await subject.seed('restore', RESTORE_LEN);
  const times = subjects.map((): number[] => []);
  for (let round = 0; round < 7; round++) {
    for (const [k, subject] of subjects.entries()) {
      const t = now();
      const n = await subject.restore('restore');
      times[k]!.push((now() - t) / 1000);
      if (n !== RESTORE_LEN) throw new Error(`${subject.name} restored ${n} messages`);
    }
  }
  return times.map(median);
}

/** Steps/second with `sessions` sessions stepping concurrently (async loops in this process). */
async function throughput(subject: Subject, prefix: string, sessions: number): Promise<number> {
  const ids = Array.from({ length: sessions }, (_, k) => `${prefix}-${k}`);
  for (const id of ids) await subject.seed(id, 10);
  const perSession = Math.ceil(THROUGHPUT_STEPS / sessions);
  const t = now();
  await Promise.all(
    ids.map(async (id) => {
      for (let i = 0; i < perSession; i++) await subject.step(id, i);
    }),
  );
  return (perSession * sessions) / ((now() - t) / 1e6);
}

async function throughputs(subjects: Subject[]): Promise<Array<[number, number]>> {
  const runs = subjects.map(() => ({ one: [] as number[], eight: [] as number[] }));
  for (let run = 0; run < THROUGHPUT_RUNS; run++) {
    for (const [k, subject] of subjects.entries()) {
      runs[k]!.one.push(await throughput(subject, `tp1-${run}`, 1));
      runs[k]!.eight.push(await throughput(subject, `tp8-${run}`, 8));
    }
  }
  return runs.map(({ one, eight }) => [median(one), median(eight)]);
}

const fmt = (x: number | undefined, digits = 0): string => (x === undefined ? 'n/a' : x.toFixed(digits));
const ratio = (a: number | undefined, b: number | undefined): string => (a === undefined || b === undefined ? 'n/a' : (b / a).toFixed(2));

function table(title: string, header: string[], rows: string[][]): void {
  console.log(`\n${title}\n`);
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`);
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-bench-'));
  const url = process.env.DATABASE_URL;
  let files = 0;
  const file = (name: string) => join(dir, `${name}-${files++}.db`);
  // Groups of subjects that take their steps in turns: each store next to its hand-written
  // baseline with the same fsync policy, so both see the same disk and the same caches.
  const groups: Array<Array<() => Promise<Subject>>> = [
    [async () => storeSubject('memory', new MemorySessionStore())],
    ...(['FULL', 'NORMAL'] as const).map((sync) => [
      async () => {
        const path = file(`store-${sync}`);
        return storeSubject(`SqliteSessionStore (${sync})`, new SqliteSessionStore({ path, synchronous: sync }), sqliteBytes(path));
      },
      async () => rawSqliteSubject(file(`raw-${sync}`), sync),
    ]),
  ];
  if (url) groups.push([() => postgresSubject(url, `lc_bench_${process.pid}_${files++}`)]);

  /** Runs `phase` on each group of fresh subjects in turn (`copies` of the group at once), closing them after. */
  async function perGroup<T>(copies: number, phase: (subjects: Subject[]) => Promise<T[]>): Promise<Array<{ names: string[]; result: T[] }>> {
    const out: Array<{ names: string[]; result: T[] }> = [];
    for (const group of groups) {
      const subjects: Subject[] = [];
      try {
        for (let copy = 0; copy < copies; copy++) for (const make of group) subjects.push(await make());
        out.push({ names: subjects.map((s) => s.name), result: await phase(subjects) });
      } finally {
        for (const subject of subjects) await subject.close();
      }
    }
    return out;
  }

  try {
    // Each group twice: the first copy at log 10, the second at log 5,000, all stepping in turns.
    const costs = await perGroup(2, (subjects) => stepCosts(subjects, subjects.map((_, k) => (k < subjects.length / 2 ? 10 : 5000))));
    const restore = (await perGroup(1, restoreMs)).flatMap((g) => g.names.map((name, k) => ({ name, ms: g.result[k]! })));
    const tp = (await perGroup(1, throughputs)).flatMap((g) => g.names.map((name, k) => ({ name, perSecond: g.result[k]! })));

    const costRows: string[][] = [];
    const shortUs = new Map<string, number>();
    for (const { names, result } of costs) {
      const width = names.length / 2;
      for (let j = 0; j < width; j++) {
        const [a, b] = [result[j]!, result[j + width]!];
        shortUs.set(names[j]!, a.us);
        costRows.push([names[j]!, fmt(a.us), fmt(b.us), ratio(a.us, b.us), fmt(a.bytes), fmt(b.bytes), ratio(a.bytes, b.bytes)]);
      }
    }

    table(
      `Per step: append 2 messages + state row update (µs: median of ${STEPS} steps; bytes: WAL written per step, median of ${STEPS / WINDOW} windows of ${WINDOW})`,
      ['store', 'µs @ log 10', 'µs @ log 5,000', 'ratio', 'bytes @ log 10', 'bytes @ log 5,000', 'ratio'],
      costRows,
    );
    table(
      'SqliteSessionStore vs the same writes by hand (µs per step @ log 10, same run)',
      ['', 'store', 'raw', 'store / raw'],
      (['FULL', 'NORMAL'] as const).map((sync) => {
        const store = shortUs.get(`SqliteSessionStore (${sync})`);
        const raw = shortUs.get(`raw better-sqlite3 (${sync})`);
        return [`synchronous=${sync}`, fmt(store), fmt(raw), ratio(raw, store)];
      }),
    );
    table(
      `Restore (load + validate) a ${RESTORE_LEN.toLocaleString('en')}-message session (median of 7; raw = SELECT + JSON.parse, no validation)`,
      ['store', 'ms', 'µs / message'],
      restore.map(({ name, ms }) => [name, fmt(ms, 1), fmt((ms * 1000) / RESTORE_LEN, 2)]),
    );
    table(
      `Throughput: steps/second, ${THROUGHPUT_STEPS} steps over 1 or 8 sessions stepping concurrently in one process (median of ${THROUGHPUT_RUNS} runs; fsync-bound rows vary with the disk)`,
      ['store', '1 session', '8 sessions'],
      tp.map(({ name, perSecond }) => [name, fmt(perSecond[0]), fmt(perSecond[1])]),
    );
    if (!url) console.log('\n(PostgreSQL skipped: set DATABASE_URL, e.g. eval "$(bash .ci/postgres.sh)")');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
