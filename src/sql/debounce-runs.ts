import { statement } from '../db/statement.ts';
import { RunLabelSchema, RunSchema, RunSecretSchema } from '../db/entities/index.ts';
import { scheduledRun } from '../db/entities/run-predicates.ts';

/**
 * $1 JSON array of one call `{ord, account_id, version_id, key, delay_s, inputs, metadata}`, $2 its sealed
 * password inputs `{ord, id, name, ciphertext}`: the waiting debounced run of that account, version and key
 * (docs/design/flow-control.md#debounce) takes the call's inputs, metadata and password inputs, and its
 * start moves to `delay_s` from now, never past its `debounce_until`; its Cancel-After deadline moves with
 * it. Its metadata pairs are rewritten in `run_labels` (the pairs no longer held deleted, the new ones
 * added), its sealed password inputs in `run_secrets` (one given again replaces its ciphertext, one not
 * given is deleted: two writes of one row in one statement would conflict). Returns the id of the run
 * joined, no row when none waits. The caller holds the key's lock.
 */
export const JOIN_DEBOUNCED_RUN = statement(
  'join_debounced_run',
  `with call as materialized (
  select * from jsonb_to_recordset($1::jsonb)
         as c(ord bigint, account_id uuid, version_id uuid, key text, delay_s float8, inputs text, metadata text)),
joined as (
  update runs r set inputs = c.inputs::jsonb, metadata = c.metadata::jsonb,
         scheduled_for = least(clock_timestamp() + make_interval(secs => c.delay_s), r.debounce_until),
         deadline = r.deadline + (least(clock_timestamp() + make_interval(secs => c.delay_s), r.debounce_until) - r.scheduled_for),
         updated_at = clock_timestamp()
    from call c
   where r.account_id = c.account_id and r.debounce_key = c.key and r.version_id = c.version_id and ${scheduledRun('r')}
  returning r.id, r.account_id, r.created_at, c.ord, c.metadata::jsonb as labels),
unlabelled as (
  delete from run_labels l using joined j
   where l.run_id = j.id and l.account_id = j.account_id and (j.labels ->> l.key) is distinct from l.value),
labelled as (
  insert into run_labels (account_id, key, value, created_at, run_id)
  select j.account_id, m.key, m.value, j.created_at, j.id from joined j cross join jsonb_each_text(j.labels) m
   where not exists (select 1 from run_labels l where l.run_id = j.id and l.account_id = j.account_id and l.key = m.key and l.value = m.value)),
secret as materialized (
  select j.id as run_id, sealed_input.* from jsonb_to_recordset($2::jsonb) as sealed_input(ord bigint, id uuid, name text, ciphertext text)
    join joined j on j.ord = sealed_input.ord),
unsealed as (
  delete from run_secrets old using joined j
   where old.run_id = j.id and old.kind = 'password_input'
     and not exists (select 1 from secret where secret.run_id = old.run_id and secret.name = old.name)),
sealed as (
  insert into run_secrets (id, run_id, kind, name, ciphertext, created_at)
  select secret.id, secret.run_id, 'password_input', secret.name, secret.ciphertext, now() from secret
  on conflict (run_id, kind, name) do update set ciphertext = excluded.ciphertext)
select id from joined`,
  [RunSchema, RunLabelSchema, RunSecretSchema],
);
