/**
 * The brain's feed-sequence properties (feed-properties.ts) at the size CI holds them to: 100,
 * 50 and 100 random sequences of up to 60 feeds.
 */
import { describeFeedSequences } from './feed-properties.js';

describeFeedSequences({ plain: 100, inject: 50, reuse: 100 });
