import type { GroupTail } from '../db/group-commit.ts';
import { NOTIFY_RUNS_WRITTEN } from '../sql/run-notifications.ts';
import { ITEMS_PER_NOTIFICATION, notificationItems, type RunEventBus } from './run-event-bus.ts';

/**
 * The group commit tail (src/db/group-commit.ts) of the runs' one-statement settlements
 * (START_FINISH_AND_SETTLE, whose first value is the run id): when the run event bus across processes
 * would notify at once anyway (nothing waiting, its gap over: one process finishing runs one at a time),
 * the group's transaction carries the NOTIFY of its runs (NOTIFY_RUNS_WRITTEN) and the bus sends none
 * for them, which saves a transaction and a round trip per run. While the bus is busy it keeps batching
 * them itself: the commits of transactions that NOTIFY are serialised database-wide, and this carries
 * at most one per bus gap. See docs/round-trips.md#notifications-carried-by-settlements.
 */
export function notifyInSettlement(bus: RunEventBus): GroupTail {
  return {
    next(group) {
      // One payload's worth at most: a larger group leaves its notifications to the bus.
      if (group.length > ITEMS_PER_NOTIFICATION) return null;
      const channel = bus.claimNotify?.() ?? null;
      if (!channel) return null;
      return {
        statements: [[NOTIFY_RUNS_WRITTEN, [channel, group.map((values) => values[0])]]],
        // One payload's worth is within NOTIFY's limit: a settlement's error is its own.
        raisesNothing: true,
        done(results) {
          const told = (results?.tail[0] as { rows: { told: string }[] } | undefined)?.rows[0]?.told;
          if (told) bus.notifiedBy?.(new Map(notificationItems(told)));
          return false;
        },
      };
    },
  };
}
