"""`labeler serve`: a PRM as an HTTP reward server (reward_server.py), its requests batched on one
scorer (batcher.py), its settings declared once (config.py)."""
