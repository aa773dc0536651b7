/**
 * Whether an error from Postgres was a statement's own (it was rolled back and the session goes on)
 * rather than one that ends the session or a lost connection.
 *
 * pg reports a server error's severity as the server wrote it, in the server's `lc_messages` language
 * ("FEHLER" for ERROR in German); the untranslated field is not passed on. So an English severity is
 * taken at its word, and any other is judged by its SQLSTATE: the classes the server also sends at FATAL
 * or PANIC (connection, authentication, resources, operator intervention, system and internal errors,
 * and the session timeouts of class 25) count as ending the session. A statement's error judged wrongly
 * that way costs a new connection. Not
 * covered: 40001 at FATAL, sent only by a standby (a conflict with recovery), which this service never
 * writes to.
 */

const MAY_END_THE_SESSION = /^(08|28|53|57P|58|F0|XX|25P03|25P04)/;

export function isStatementError(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const { severity, code } = error as { severity?: unknown; code?: unknown };
  if (severity === 'ERROR') return true;
  if (typeof severity !== 'string' || severity === 'FATAL' || severity === 'PANIC') return false;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !MAY_END_THE_SESSION.test(code);
}
