import { statement } from '../db/statement.ts';
import { PurchaseSchema } from '../db/entities/index.ts';

/** A buyer's purchases (table `purchases`: one pin per account and workflow). */

/**
 * Re-pins a purchase to the workflow's active version, fenced on the pin it had (docs/design/rules.md).
 * $1 new version id, $2 account id, $3 workflow id, $4 the previous version id.
 */
export const ACCEPT_WORKFLOW_UPDATE = statement(
  'accept_workflow_update',
  `update purchases set version_id = $1::uuid, updated_at = now() where account_id = $2::uuid and workflow_id = $3::uuid and version_id = $4::uuid`,
  [PurchaseSchema],
);
