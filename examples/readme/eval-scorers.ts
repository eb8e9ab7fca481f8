// examples/readme/eval-scorers.ts
/** The scorers of the example's evaluation, each with its gate (the mean over the cases it applies to). */
import { expectations, sameDecisions, textMatches, toolsWithin, withinBudget } from 'loopchart/evals';

export const scorers = [
  ...expectations({ threshold: 1 }),
  sameDecisions({ threshold: 1 }),
  toolsWithin(['lookup'], { threshold: 1 }),
  withinBudget({ maxTurns: 3 }, { threshold: 1 }),
  textMatches(/order|total/i, { threshold: 0.5 }),
];
