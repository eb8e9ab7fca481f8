import type { StateName } from './schemas.js';

/** Base class of every error loopchart throws on purpose; `code` is stable for `switch`es. */
export class LoopchartError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A feed arrived in a state that does not accept it. The machine is unchanged. */
export class IllegalFeedError extends LoopchartError {
  readonly feed: string;
  readonly state: StateName;
  constructor(feed: string, state: StateName, why?: string) {
    super('IllegalFeed', `${feed} is not allowed in state ${state}${why ? `: ${why}` : ''}`);
    this.feed = feed;
    this.state = state;
  }
}

/** A feed arrived in a legal state but its payload breaks the contract. The machine is unchanged. */
export class InvalidFeedError extends LoopchartError {
  readonly feed: string;
  constructor(feed: string, problem: string) {
    super('InvalidFeed', `${feed}: ${problem}`);
    this.feed = feed;
  }
}

/** `restore` was given something that is not a snapshot this version can read. */
export class InvalidSnapshotError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidSnapshot', `cannot restore loop snapshot: ${problem}`);
  }
}
