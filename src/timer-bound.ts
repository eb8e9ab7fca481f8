/**
 * setTimeout's longest delay: 2^31 - 1 ms, about 24.8 days. Node cuts a longer delay to 1 ms
 * (with a TimeoutOverflowWarning), so a timeout past it would fire at once. Every wait the
 * library arms is held to it: a longer timeout is no timeout, a longer wait is armed at the
 * bound and looked at again, or the option is refused where it enters.
 *
 * @example
 * ```ts
 * const armable = (ms: number) => Number.isFinite(ms) && ms <= MAX_TIMER_MS;
 * ```
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
