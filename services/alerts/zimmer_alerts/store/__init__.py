"""The alerts schema: its tables, declared once (`tables`, `health_tables`, `recovery_tables`; the
migrations build them, a test checks they agree), and the queries over them: the ledger
(`ledger`: recording a page, what the notifier sends; `ledger_pages`: the read, a page at a time)
and the health records (`health_records`: job runs, heartbeats, NATS servers). Functions over a
connection: the caller's unit of work (or consumer's transaction) decides what commits together."""
