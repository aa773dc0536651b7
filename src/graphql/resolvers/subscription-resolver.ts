import 'reflect-metadata';
import { Args, Resolver, Root, Subscription } from 'type-graphql';
import { RunEventsSubscriptionArgs } from '../types/args.ts';
import type { GraphqlContext } from '../context.ts';
import { runEventStream, type StreamedRunEvent } from '../run-event-stream.ts';
import { RunEventType } from '../types/objects.ts';

@Resolver()
export class RunEventsSubscriptionResolver {
  @Subscription(() => RunEventType, {
    description:
      "A run's events after afterSequence (default 0: from the start), replayed then live, in order, without gaps or duplicates; " +
      'completes after the terminal event (at once for a finished run already past the cursor).',
    subscribe: ({ args, context }) => {
      const ctx = context as GraphqlContext;
      // type-graphql types a subscription's arguments `any`; the schema has checked them against RunEventsSubscriptionArgs.
      const { runId, afterSequence } = args as RunEventsSubscriptionArgs;
      return runEventStream(ctx.deps, runId, afterSequence);
    },
  })
  runEvents(@Root() event: StreamedRunEvent, @Args(() => RunEventsSubscriptionArgs) _args: RunEventsSubscriptionArgs): StreamedRunEvent {
    return event;
  }
}
