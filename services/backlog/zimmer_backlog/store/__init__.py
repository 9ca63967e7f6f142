"""The backlog schema: its tables, declared once (`tables`; the migrations build them, a test checks
they agree), and the queries over them: the queue's rows (`queue`: the ranking lock and re-rank,
appends, reads a page at a time, counts, session records, removal, pins), a start's rows
(`start_rows`) and each row read beside its issue as GitHub last showed it (`on_github`). Functions
over a connection: the caller's unit of work (or consumer's transaction) decides what commits
together."""
