import { ApolloGateway, IntrospectAndCompose, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer, type ApolloServerOptionsWithGateway, type BaseContext } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';

/**
 * A federation gateway over this service's GraphQL subgraph (the way a supergraph router would front it):
 *
 *   SUBGRAPH_URL=http://localhost:8080/graphql INTERNAL_API_TOKEN=… npx tsx docs/examples/federation-gateway.ts
 *
 * It composes the supergraph from the subgraph's `_service { sdl }` and forwards every subgraph request
 * with the internal bearer token. Production setups compose once (rover) and run the router instead;
 * test/graphql/gateway.test.ts runs this file's gateway against the service.
 */

export interface GatewayOptions {
  subgraphUrl: string;
  internalToken: string;
  port?: number;
}

export async function startGateway(opts: GatewayOptions): Promise<{ url: string; stop: () => Promise<void> }> {
  const gateway = new ApolloGateway({
    supergraphSdl: new IntrospectAndCompose({ subgraphs: [{ name: 'workflow-runs', url: opts.subgraphUrl }] }),
    buildService: ({ url }) =>
      new RemoteGraphQLDataSource({
        url,
        willSendRequest: ({ request }) => {
          request.http?.headers.set('authorization', `Bearer ${opts.internalToken}`);
        },
      }),
  });
  // @apollo/gateway 2.14 declares version 1 of the gateway interface and Apollo Server 5 version 2; the
  // calls the server makes are the same in both.
  const server = new ApolloServer({ gateway: gateway as unknown as ApolloServerOptionsWithGateway<BaseContext>['gateway'] });
  const { url } = await startStandaloneServer(server, { listen: { port: opts.port ?? 4000, host: '127.0.0.1' } });
  return { url, stop: () => server.stop() };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const subgraphUrl = process.env.SUBGRAPH_URL ?? 'http://localhost:8080/graphql';
  const internalToken = process.env.INTERNAL_API_TOKEN;
  if (!internalToken) {
    console.error('set INTERNAL_API_TOKEN to the token `npm start` printed (or the one it was started with)');
    process.exit(2);
  }
  const { url } = await startGateway({ subgraphUrl, internalToken, port: Number(process.env.GATEWAY_PORT ?? 4000) });
  console.log(`federation gateway on ${url} over ${subgraphUrl}`);
}
