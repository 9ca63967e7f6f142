-- One GitHub issue, one open row (issue 27). Keys used to be compared as spelled, so `zimmer#1`,
-- `ZIMMER#1` and `acme/zimmer#1` were three keys for one issue, each with its own queued row, and
-- pulls started a session on each. From here a key has one spelling (lower-case `repo#n`, from the
-- issue URL; the contract maps every other spelling to it) and the database holds at most one
-- open row per issue, whatever its key says.
--
-- Today's duplicates are merged first: per issue the best-ranked open row stays (a row a spawn is
-- already starting first, then the pull order: precedence, oldest, lowest id); the others are
-- removed as `superseded`, which is what the liveness sweep would call them. Rows keep their old
-- spelling in the ledger below, beside what became of them.

CREATE TABLE backlog.key_merges (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id       bigint      NOT NULL REFERENCES backlog.work_backlog_items (id),
    action        text        NOT NULL CHECK (action IN ('superseded', 'rekeyed', 'kept_spelling')),
    old_key       text        NOT NULL,
    new_key       text        NOT NULL,
    kept_item_id  bigint      REFERENCES backlog.work_backlog_items (id),  -- superseded: the open row kept
    merged_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TEMP TABLE spelled ON COMMIT DROP AS
SELECT id, key, status,
       lower(substring(issue_url FROM '^https://github\.com/([^/]+/[^/]+)/issues/[0-9]+$')) AS issue_repo,
       substring(issue_url FROM '/issues/([0-9]+)$') AS issue_number,
       lower(substring(issue_url FROM '^https://github\.com/[^/]+/([^/]+)/issues/[0-9]+$'))
           || '#' || substring(issue_url FROM '/issues/([0-9]+)$') AS canonical,
       row_number() OVER (
           PARTITION BY lower(substring(issue_url FROM '^https://github\.com/([^/]+/[^/]+)/issues/[0-9]+$')),
                        substring(issue_url FROM '/issues/([0-9]+)$'),
                        status IN ('queued', 'starting')
           ORDER BY status = 'starting' DESC, precedence DESC, added_at, id) AS open_rank
FROM backlog.work_backlog_items
WHERE issue_url ~ '^https://github\.com/[^/]+/[^/]+/issues/[0-9]+$';

-- The duplicates: every open row of an issue but its best-ranked one.
INSERT INTO backlog.key_merges (item_id, action, old_key, new_key, kept_item_id)
SELECT dup.id, 'superseded', dup.key, dup.canonical, kept.id
FROM spelled dup
JOIN spelled kept ON kept.issue_repo = dup.issue_repo AND kept.issue_number = dup.issue_number
                 AND kept.status IN ('queued', 'starting') AND kept.open_rank = 1
WHERE dup.status IN ('queued', 'starting') AND dup.open_rank > 1;

UPDATE backlog.work_backlog_items item
SET status = 'removed', removed_at = now(), removed_by = 'migration 0007: one open row per issue',
    removal_reason = 'superseded', liveness_state = 'superseded', liveness_checked_at = now()
FROM backlog.key_merges merge
WHERE merge.action = 'superseded' AND merge.item_id = item.id;

-- Every other spelling becomes the canonical one, history rows included (so "a newer row carries
-- the same key" sees through spellings). Where two different issues share `repo#n` (two owners'
-- repositories of one name) and both are open, one row takes the key (the one already spelling it,
-- else the oldest) and the other keeps its spelling, marked so in the ledger.
INSERT INTO backlog.key_merges (item_id, action, old_key, new_key)
SELECT s.id,
       CASE WHEN s.status IN ('queued', 'starting') AND EXISTS (
                SELECT 1 FROM spelled other
                WHERE other.canonical = s.canonical AND other.status IN ('queued', 'starting') AND other.open_rank = 1
                  AND (other.key = other.canonical OR other.id < s.id)
                  AND (other.issue_repo, other.issue_number) <> (s.issue_repo, s.issue_number))
            THEN 'kept_spelling' ELSE 'rekeyed' END,
       s.key, s.canonical
FROM spelled s
WHERE s.key <> s.canonical
  AND NOT EXISTS (SELECT 1 FROM backlog.key_merges m WHERE m.item_id = s.id AND m.action = 'superseded');

UPDATE backlog.work_backlog_items item
SET key = merge.new_key
FROM backlog.key_merges merge
WHERE merge.item_id = item.id AND merge.action IN ('rekeyed', 'superseded');

-- At most one open row per issue (owner/repo/number, any case), whatever its key. An issue URL has
-- one shape (the contract's pattern, the table's CHECK: no trailing slash, no query, no leading
-- zero), so its lower-case spelling is the issue: cheaper to index than its parts (every re-space
-- rewrites a band's rows, and each new row version is indexed).
CREATE UNIQUE INDEX work_backlog_one_open_row_per_issue ON backlog.work_backlog_items (lower(issue_url))
    WHERE status IN ('queued', 'starting') AND issue_url IS NOT NULL;

-- Rows by key in any status: a pull's "which not-queued is it", a pull by keys, "a newer row
-- carries the same key" (the sweep and a hold) all ask it.
CREATE INDEX work_backlog_by_key ON backlog.work_backlog_items (key, id);
