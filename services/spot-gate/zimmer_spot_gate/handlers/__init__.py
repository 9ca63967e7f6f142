"""What the spot gate serves and consumes, each built once by `bootstrap` with its collaborators as
constructor arguments: the session operations (`sessions.SpotGate`, also the application), the one
admission path (`admissions`), the turn gate and its inputs (`turns`, `snapshot`), the policy,
triggers and costs (`policy`), the spot queue's doors (`queue_ops`), wall-clock wakes (`wakes`),
auth-outage parks (`parks`), the trash and deletion (`trash`, `deletion`), the sweepers' clone
questions (`clones`) and the lines written to a session's log (`session_log`)."""
