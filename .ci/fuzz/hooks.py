"""Schemathesis hooks for .ci/fuzz: each drops one documented false positive, and nothing else."""

import json
import re
from urllib.parse import parse_qsl, urlsplit

import schemathesis

SCHEMA_VALID_REQUEST_REJECTED = "ST202"
SCHEMA_VIOLATING_REQUEST_ACCEPTED = "ST201"
MISMATCH_MESSAGE = "the Idempotency-Key header and the body idempotencyKey differ"
INPUT_OPERATIONS = {"POST /runs", "POST /runs/{id}/replay"}
BULK_OPERATIONS = {"POST /runs/cancel", "POST /runs/replay"}
START_OPERATIONS = {"POST /runs", "POST /runs/{id}/reschedule"}
# Start rules that join two fields, a field and a header, a field and the clock, or a field and the API
# key's catalog setting: each is stated in the document's descriptions, none in its schemas.
START_RULES = [
    re.escape('give either the Start-After header or "startAt", not both'),
    re.escape('"startAt" must be at most 7 days ahead'),
    re.escape('"debounce" decides the start itself: not with Start-After or "startAt"'),
    re.escape('"debounce.maxDelay" must be at least "debounce.delay"'),
    re.escape('"maxConcurrentPerConcurrencyKey" needs a "concurrencyKey"'),
    re.escape('"maxConcurrentPerConcurrencyKey" may lower this API key\'s bound of ') + r"\d+" + re.escape(", never raise it"),
]


@schemathesis.hook
def filter_failure(context, failure, case, response):
    return not (
        _is_rule_beyond_the_document(failure, case, response)
        or _is_cursor_of_another_call(failure, case, response)
        or _is_metadata_lost_in_the_query(failure, case, response)
        or _is_start_rule_beyond_the_document(failure, case, response)
    )


def _is_rule_beyond_the_document(failure, case, response):
    # Two rules of POST /runs that the OpenAPI document cannot state, so Schemathesis draws requests
    # that are schema-valid yet rightly refused, and reports "schema-valid request rejected":
    # - a workflow's inputs are checked against that workflow's own inputSchema (GET /workflows/{id});
    #   `inputs` is an open object in the document, so a real workflow with inputs it does not take is
    #   400 invalid_inputs; a replay (POST /runs/{id}/replay) merges its `inputs` over a real run's and
    #   checks them by the same rule;
    # - the idempotency key comes from the Idempotency-Key header or the body's idempotencyKey; when
    #   both are sent and differ, the spec requires 400 invalid_request.
    # Only that failure, on those exact answers, is dropped; every other check still applies to them.
    if failure.code != SCHEMA_VALID_REQUEST_REJECTED or case.operation.label not in INPUT_OPERATIONS or response.status_code != 400:
        return False
    error = _error(response)
    if error.get("code") == "invalid_inputs":
        return True
    return error.get("code") == "invalid_request" and error.get("message") == MISMATCH_MESSAGE and _keys_differ(case)


def _is_cursor_of_another_call(failure, case, response):
    # The bulk calls' `cursor` is the opaque `nextCursor` of a call with the same filter: only the service
    # can tell one it issued, so any other string Schemathesis draws is schema-valid and rightly 400
    # invalid_cursor. Dropped only for that answer to a body that sends a cursor.
    if failure.code != SCHEMA_VALID_REQUEST_REJECTED or case.operation.label not in BULK_OPERATIONS or response.status_code != 400:
        return False
    return _error(response).get("code") == "invalid_cursor" and isinstance(case.body, dict) and "cursor" in case.body


def _error(response):
    try:
        body = json.loads(response.content)
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _keys_differ(case):
    header_key = next((value for key, value in (case.headers or {}).items() if key.lower() == "idempotency-key"), None)
    body_key = case.body.get("idempotencyKey") if isinstance(case.body, dict) else None
    return header_key is not None and body_key is not None and header_key != body_key


def _is_metadata_lost_in_the_query(failure, case, response):
    # GET /runs's `metadata` is a deepObject (`metadata[KEY]=VALUE`). To violate its schema Schemathesis
    # draws members that are null, numbers or nested objects, but the query string it then sends drops the
    # null ones and flattens the rest, so the request that reached the service can be a valid one, which
    # it rightly answers; Schemathesis judges the object it drew. Dropped only when what was sent is within
    # the document's limits (at most 16 distinct keys of 1 to 64 characters, values of at most 512, no NUL).
    if failure.code != SCHEMA_VIOLATING_REQUEST_ACCEPTED or case.operation.label != "GET /runs" or response.status_code != 200:
        return False
    sent = parse_qsl(urlsplit(response.request.url).query, keep_blank_values=True)
    others = [name for name, _ in sent if not name.startswith("metadata")]
    pairs = [(name[len("metadata["):-1], value) for name, value in sent if name.startswith("metadata[") and name.endswith("]")]
    if len(pairs) + len(others) != len(sent):
        return False
    keys = [key for key, _ in pairs]
    return (
        len(keys) <= 16
        and len(set(keys)) == len(keys)
        and all(1 <= len(key) <= 64 and "\x00" not in key for key in keys)
        and all(len(value) <= 512 and "\x00" not in value for _, value in pairs)
    )


def _is_start_rule_beyond_the_document(failure, case, response):
    # A start's rules across fields (START_RULES): Schemathesis draws each field within its own schema, so
    # a startAt years ahead, both Start-After and startAt, or a per-key bound above the API key's are
    # schema-valid yet rightly 400 invalid_request. Dropped only for exactly those messages.
    if failure.code != SCHEMA_VALID_REQUEST_REJECTED or case.operation.label not in START_OPERATIONS or response.status_code != 400:
        return False
    error = _error(response)
    message = error.get("message")
    return error.get("code") == "invalid_request" and isinstance(message, str) and any(re.fullmatch(rule, message) for rule in START_RULES)
