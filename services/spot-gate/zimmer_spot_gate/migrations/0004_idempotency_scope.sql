-- A spawn's idempotency key belongs to its caller (the gateway's credential realm and the
-- session a connection speaks for, or the service that asked): no caller can claim, or collide
-- with, another's key (issue 9: a fleet caller could pre-create the backlog's work-backlog:item:N).
ALTER TABLE spot_gate.sessions ADD COLUMN idempotency_scope text NOT NULL DEFAULT '';
ALTER TABLE spot_gate.sessions DROP CONSTRAINT sessions_idempotency_key_key;
CREATE UNIQUE INDEX sessions_idempotency ON spot_gate.sessions (idempotency_scope, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
