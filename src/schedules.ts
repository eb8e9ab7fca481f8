/**
 * `loopchart/schedules`: agents that run on a schedule. `schedule` stores a schedule beside the
 * sessions (a `MemorySessionStore`, a `SqliteSessionStore` file or a `PostgresSessionStore` schema);
 * `startScheduler` fires them in a process of yours (or `loopchart scheduler`), each tick once even
 * with several schedulers on one store, the ticks of schedules on one session in turn;
 * `parseCron` and `nextCronTime` are the strict five-field cron reader behind `cron` schedules.
 */
export { InvalidCronError, nextCronTime, parseCron, type CronExpression } from './schedules/cron.js';
export { UnknownTimeZoneError } from './schedules/time-zone.js';
export {
  deleteSchedule,
  InvalidScheduleError,
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  schedule,
  ScheduleInfoSchema,
  ScheduleNotFoundError,
  type ListSchedulesOptions,
  type ScheduleInfo,
  type ScheduleSource,
  type ScheduleOptions,
} from './schedules/schedules.js';
export {
  InvalidSchedulerOptionsError,
  startScheduler,
  UnknownScheduleAgentError,
  type Scheduler,
  type SchedulerOptions,
  type SchedulerStopOptions,
  type ScheduleTick,
} from './schedules/scheduler.js';
export type { Timing } from './schedules/row.js';
