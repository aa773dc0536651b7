import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ensureSearchAttributes, SEARCH_ATTRIBUTE_NAMES } from '../../src/engine/temporal/search-attributes.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';

/**
 * On a namespace without them, ensureSearchAttributes registers the run workflow's search attributes as
 * Keyword: the type the Temporal CLI gives the same names on `default` (the dev server registers them
 * there with `--search-attribute NAME=Keyword`), and again nothing on a second call.
 */

const address = temporalAddress('search attributes');

if (address) {
  test(
    'the missing search attributes are added as Keyword, once',
    countTemporal(async () => {
      const connection = await Connection.connect({ address });
      try {
        const namespace = `search-attributes-${randomBytes(4).toString('hex')}`;
        await promisify(execFile)(process.env.TEMPORAL_CLI ?? 'temporal', ['operator', 'namespace', 'create', '--namespace', namespace, '--address', address]);
        assert.equal((await ensureSearchAttributes(connection, namespace)).sort(), [...SEARCH_ATTRIBUTE_NAMES].sort());
        assert.equal(await ensureSearchAttributes(connection, namespace), []);
        const added = (await connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
        const byCli = (await connection.operatorService.listSearchAttributes({ namespace: 'default' })).customAttributes ?? {};
        for (const name of SEARCH_ATTRIBUTE_NAMES) {
          assert.ok(byCli[name] !== undefined, `${name} registered on default by the dev server`);
          assert.is(added[name], byCli[name], name);
        }
      } finally {
        await connection.close();
      }
    }),
  );
}

test.run();
