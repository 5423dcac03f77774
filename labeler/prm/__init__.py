"""Process Reward Models: training on labels shards, checkpoints, scoring solutions, exports for other trainers."""
