"""The maintainer review dashboard: a server-rendered FastAPI app over the journal."""
