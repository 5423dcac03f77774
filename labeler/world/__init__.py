"""A controlled world for measuring label quality on a CPU: arithmetic word problems whose solutions
have known first errors (problems.py), and a small causal LM trained on them until it is a competent
completer (tokenizer.py, training.py, cache.py). bench/world.py runs the product's own commands in it."""
