-- Sessions: spot-gate is their system of record (DESIGN §2).
CREATE TABLE spot_gate.triggers (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text        NOT NULL CHECK (kind IN ('slack','github_issue','github_label','schedule','ao_event')),
    name              text        NOT NULL,
    scheduling_class  text        CHECK (scheduling_class IN ('priority','spot')),
    precedence        integer,
    prompt            text,
    enabled           boolean     NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE spot_gate.sessions (
    id                       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key          text UNIQUE,
    parent_session_id        bigint REFERENCES spot_gate.sessions (id),
    forked_from_session_id   bigint REFERENCES spot_gate.sessions (id),
    genesis                  text        NOT NULL CHECK (genesis IN ('web_ui','slack','github_issue','github_label','schedule','ao_event','api','unknown')),
    scheduling_class         text        CHECK (scheduling_class IN ('priority','spot')),
    precedence               integer     NOT NULL DEFAULT 0,
    status                   text        NOT NULL DEFAULT 'waiting'
                                         CHECK (status IN ('waiting','running','needs_input','archived','failed')),
    runtime                  text        NOT NULL DEFAULT 'claude_code' CHECK (runtime IN ('claude_code','codex')),
    harness                  text        NOT NULL DEFAULT 'claude_code',
    model                    text        NOT NULL DEFAULT 'claude-opus-4',
    title                    text        NOT NULL DEFAULT '',
    goal                     text,
    prompt                   text,
    trigger_id               bigint REFERENCES spot_gate.triggers (id),
    clone_path               text,
    metadata                 jsonb       NOT NULL DEFAULT '{}'::jsonb,
    is_status_summary_fork   boolean     NOT NULL DEFAULT false,
    ever_started             boolean     NOT NULL DEFAULT false,
    -- The hold record: the gate's custody of a refused turn.
    spot_hold_reason         text        CHECK (spot_hold_reason IN ('at_utilization_limit','fleet_at_cap')),
    spot_hold_retry_at       timestamptz,
    spot_hold_count          integer     NOT NULL DEFAULT 0,
    held_turn_kind           text,
    held_prompt              text,
    held_attachments         jsonb,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
-- The re-check scan reads only due holds, in time order.
CREATE INDEX sessions_hold_due ON spot_gate.sessions (spot_hold_retry_at) WHERE spot_hold_reason IS NOT NULL;
CREATE INDEX sessions_running ON spot_gate.sessions (status) WHERE status = 'running';
CREATE INDEX sessions_parent ON spot_gate.sessions (parent_session_id);

-- A second refused turn while one is held waits here, delivered after the turn ahead of it.
CREATE TABLE spot_gate.enqueued_messages (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id    bigint      NOT NULL REFERENCES spot_gate.sessions (id),
    turn_kind     text        NOT NULL,
    prompt        text,
    attachments   jsonb       NOT NULL DEFAULT '[]'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz
);
CREATE INDEX enqueued_pending ON spot_gate.enqueued_messages (session_id, id) WHERE delivered_at IS NULL;

-- Every spot decision, admit or hold, with its numbers: "why was this session held at 14:02?"
CREATE TABLE spot_gate.gate_decisions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  bigint      NOT NULL REFERENCES spot_gate.sessions (id),
    turn_kind   text        NOT NULL,
    allowed     boolean     NOT NULL,
    reason      text        NOT NULL,
    ceiling     text,
    sentence    text        NOT NULL,
    numbers     jsonb       NOT NULL,
    decided_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_decisions_session ON spot_gate.gate_decisions (session_id, id DESC);

-- The policy is one row; genesis overrides store only departures from the defaults.
CREATE TABLE spot_gate.spot_policy (
    id                  boolean PRIMARY KEY DEFAULT true CHECK (id),
    gating_enabled      boolean     NOT NULL DEFAULT true,
    reserve_five_hour   double precision NOT NULL DEFAULT 0.2 CHECK (reserve_five_hour BETWEEN 0 AND 1),
    reserve_seven_day   double precision NOT NULL DEFAULT 0.1 CHECK (reserve_seven_day BETWEEN 0 AND 1),
    max_sessions        integer     NOT NULL DEFAULT 10 CHECK (max_sessions >= 0),
    genesis_overrides   jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at          timestamptz NOT NULL DEFAULT now()
);
INSERT INTO spot_gate.spot_policy DEFAULT VALUES;
