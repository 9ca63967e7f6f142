"""SQL for the spot_gate schema. Functions take the caller's connection so a state change, its
decision log row and its outbox events commit together."""
