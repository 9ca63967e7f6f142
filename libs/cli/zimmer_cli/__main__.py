from zimmer_cli.main import app

app()
