import { SpanStatusCode } from '@opentelemetry/api';
import type { ApolloServerPlugin } from '@apollo/server';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';
import { traceRoute } from '../observability/trace-spans.ts';
import { activeTracer } from '../observability/tracing.ts';

/**
 * Apollo plugin: one span per GraphQL operation (docs/tracing.md), a child of the HTTP server span,
 * named `{type} {name}` by the OpenTelemetry GraphQL conventions (`query RunsPage`), with
 * `graphql.operation.type` / `graphql.operation.name`. The document itself is not recorded (literals may
 * carry values callers consider private). Nothing at all when tracing is off.
 */
export const tracingPlugin: ApolloServerPlugin = {
  async requestDidStart({ request }) {
    const tracer = activeTracer();
    if (!tracer) return;
    traceRoute(request.http?.method, '/graphql');
    const span = tracer.startSpan('GraphQL Operation');
    return {
      async didResolveOperation({ operation, operationName }) {
        const type = operation?.operation ?? 'query';
        span.updateName(operationName ? `${type} ${operationName}` : type);
        span.setAttribute('graphql.operation.type', type);
        if (operationName) span.setAttribute('graphql.operation.name', operationName);
      },
      async didEncounterErrors({ errors }) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        const code = errors[0]?.extensions?.code;
        span.setAttribute(ATTR_ERROR_TYPE, typeof code === 'string' ? code : 'GraphQLError');
      },
      async willSendResponse() {
        span.end();
      },
    };
  },
};
