-- Transactional outbox: written in the same transaction as the state change it announces,
-- relayed to JetStream with Nats-Msg-Id = "<schema>.outbox.<id>".
CREATE TABLE "{schema}".outbox (
    id          bigserial PRIMARY KEY,
    subject     text        NOT NULL,
    event_type  text        NOT NULL,
    payload     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX outbox_unsent ON "{schema}".outbox (id) WHERE sent_at IS NULL;

-- Idempotent consumers: a message id is recorded in the same transaction as its effects.
CREATE TABLE "{schema}".processed_messages (
    consumer      text        NOT NULL,
    message_id    text        NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
