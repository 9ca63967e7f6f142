-- The quota pool: accounts, their readings, the spend ledger, burn rates and calibration.
CREATE TABLE spot_gate.accounts (
    account     text PRIMARY KEY,
    status      text        NOT NULL CHECK (status IN ('active','quota_exceeded','needs_reauth')),
    serving     boolean     NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE spot_gate.quota_readings (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account                 text        NOT NULL REFERENCES spot_gate.accounts (account),
    status                  text        NOT NULL,
    five_hour_utilization   double precision CHECK (five_hour_utilization >= 0),
    five_hour_resets_at     timestamptz,
    seven_day_utilization   double precision CHECK (seven_day_utilization >= 0),
    seven_day_resets_at     timestamptz,
    read_at                 timestamptz NOT NULL,
    received_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quota_readings_newest ON spot_gate.quota_readings (account, read_at DESC, id DESC);

CREATE TABLE spot_gate.spend_ledger (
    request_id          text PRIMARY KEY,  -- idempotent ingest
    session_id          bigint,
    harness             text        NOT NULL,
    model               text        NOT NULL,
    input_tokens        bigint      NOT NULL DEFAULT 0,
    output_tokens       bigint      NOT NULL DEFAULT 0,
    cache_write_tokens  bigint      NOT NULL DEFAULT 0,
    cache_read_tokens   bigint      NOT NULL DEFAULT 0,
    dollars             double precision NOT NULL,
    at                  timestamptz NOT NULL
);
CREATE INDEX spend_ledger_at ON spot_gate.spend_ledger (at);
CREATE INDEX spend_ledger_combination ON spot_gate.spend_ledger (harness, model, session_id, at);

CREATE TABLE spot_gate.burn_rates (
    harness             text NOT NULL,
    model               text NOT NULL,
    dollars_per_minute  double precision NOT NULL,
    sessions_counted    integer NOT NULL,
    computed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (harness, model)
);

CREATE TABLE spot_gate.window_calibration (
    window_name       text PRIMARY KEY CHECK (window_name IN ('five_hour','seven_day')),
    capacity_dollars  double precision NOT NULL CHECK (capacity_dollars > 0),
    observations      integer NOT NULL DEFAULT 1,
    calibrated_at     timestamptz NOT NULL DEFAULT now()
);
