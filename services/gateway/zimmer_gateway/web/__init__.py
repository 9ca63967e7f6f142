"""The operator web surface (DESIGN §6): server-rendered pages behind a signed session cookie."""
