"""Execution: the vLLM generator, model provisioning, and the executors that run labeling units."""
