// The GraphQL explorer at GET /graphql (docs/design/api-docs.md). A file of its own, not an inline
// script: the page's Content-Security-Policy allows scripts from this server only.
/* global React, ReactDOM, GraphiQL, graphqlSse */
(function () {
  'use strict';
  var params = new URLSearchParams(window.location.search);
  var endpoint = window.location.pathname;
  var http = GraphiQL.createFetcher({ url: endpoint });

  // Subscriptions use the GraphQL-over-SSE endpoint next to /graphql, with the headers of the editor.
  function isSubscription(params) {
    var query = String(params.query || '').replace(/#[^\n]*/g, '');
    var name = params.operationName;
    var ops = query.match(/\b(query|mutation|subscription)\b\s*([_A-Za-z][_0-9A-Za-z]*)?/g) || [];
    for (var i = 0; i < ops.length; i++) {
      var parts = ops[i].split(/\s+/);
      if (parts[0] === 'subscription' && (!name || parts[1] === name || ops.length === 1)) return true;
    }
    return false;
  }

  function fetcher(graphQLParams, opts) {
    if (!isSubscription(graphQLParams)) return http(graphQLParams, opts);
    var client = graphqlSse.createClient({ url: endpoint + '/stream', headers: (opts && opts.headers) || {}, retryAttempts: 0 });
    return client.iterate(graphQLParams);
  }

  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      // ?query=…&variables=… open the explorer on that operation (links from docs and tickets).
      query: params.get('query') || undefined,
      variables: params.get('variables') || undefined,
      defaultQuery: '# The internal GraphQL API. Set the token in Headers below, then run.\n{\n  account(handle: "demo") {\n    handle\n  }\n}\n',
      defaultHeaders: '{\n  "Authorization": "Bearer <INTERNAL_API_TOKEN>"\n}',
      defaultEditorToolsVisibility: 'headers',
    }),
  );
})();
