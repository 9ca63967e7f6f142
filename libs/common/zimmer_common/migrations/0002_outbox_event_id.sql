-- A globally unique id per event. The row id alone repeats across databases (a rebuilt
-- database, a restored backup, another deployment sharing the NATS account), and JetStream
-- would silently drop a new event whose Nats-Msg-Id matched an old one inside its window.
ALTER TABLE "{schema}".outbox ADD COLUMN event_id uuid NOT NULL DEFAULT gen_random_uuid();
