-- Idempotency keys (DESIGN §5): the first answer to a keyed request, written in the same
-- transaction as the request's effects, so a retry with the same key gets that answer back and
-- nothing is done twice. Scoped to the caller the gateway authenticated. `progress` holds what a
-- multi-step request (a pull by count) committed before its answer, so a retry can finish it.
CREATE TABLE "{schema}".idempotency_keys (
    scope         text        NOT NULL,
    op            text        NOT NULL,
    key           text        NOT NULL,
    request_hash  text        NOT NULL,
    response      jsonb,
    progress      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, op, key)
);
CREATE INDEX idempotency_keys_created ON "{schema}".idempotency_keys (created_at);
