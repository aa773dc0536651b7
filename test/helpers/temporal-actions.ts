import proto from '@temporalio/proto';
import type { temporal } from '@temporalio/proto';

/**
 * Counts the billable Temporal actions a workflow execution's history shows, by the rules of the
 * server's own action counter (docs/temporal-operations.md#what-a-run-costs):
 *
 * - the workflow started (a client start, or a signal-with-start that started it): 1;
 * - each signal received: 1;
 * - each command the workflow issued that is billed: an activity scheduled, a timer started, a
 *   search-attribute upsert, a memo change, a signal to another workflow, a continue-as-new: 1 each; a
 *   child workflow: 2; markers (local activities, patches, side effects): 1 per workflow task that has
 *   any; the TemporalChangeVersion upsert that comes with a patch: nothing;
 * - each activity retry (an attempt after the first): 1.
 *
 * Not billed: the workflow's completion, failure or cancellation, a cancellation request, timers that
 * fire. Billed but absent from histories, so not counted here: heartbeats and queries.
 */

type History = temporal.api.history.v1.IHistory;

export interface ActionCount {
  total: number;
  /** Search-attribute upserts (the RunStatus / RunOutcome the workflow keeps current). */
  upserts: number;
  /** Everything else: what the run's shape costs (start, activities, timers, signals). */
  work: number;
  /** Each billed event's type, in order (for messages). */
  billed: string[];
}

const ONE = new Set([
  'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
  'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED',
  'EVENT_TYPE_TIMER_STARTED',
  'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED',
  'EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
  'EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW',
]);

const EVENT_TYPES = proto.temporal.api.enums.v1.EventType as unknown as Record<number, string>;

/** The event type's proto name (histories fetched by the client carry the enum's number). */
function typeName(eventType: unknown): string {
  return typeof eventType === 'number' ? (EVENT_TYPES[eventType] ?? String(eventType)) : String(eventType);
}

/** The upsert Temporal makes of the patches a workflow uses (TemporalChangeVersion), which is not billed. */
function onlyChangeVersion(e: temporal.api.history.v1.IHistoryEvent): boolean {
  const fields = Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {});
  return fields.length > 0 && fields.every((name) => name === 'TemporalChangeVersion');
}

export function countActions(history: History): ActionCount {
  const billed: string[] = [];
  const markerTasks = new Set<string>();
  for (const e of history.events ?? []) {
    const type = typeName(e.eventType);
    if (type === 'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES' && onlyChangeVersion(e)) continue;
    if (type === 'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED' || ONE.has(type)) billed.push(type);
    else if (type === 'EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED') billed.push(type, type);
    else if (type === 'EVENT_TYPE_MARKER_RECORDED') {
      const task = String(e.markerRecordedEventAttributes?.workflowTaskCompletedEventId ?? '');
      if (!markerTasks.has(task)) billed.push(type);
      markerTasks.add(task);
    } else if (type === 'EVENT_TYPE_ACTIVITY_TASK_STARTED' && (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1) {
      billed.push('activity retry');
    }
  }
  const upserts = billed.filter((t) => t === 'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES').length;
  return { total: billed.length, upserts, work: billed.length - upserts, billed };
}
