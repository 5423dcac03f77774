"""Monte-Carlo step labels: planning work units, strategies, the rollout ledger, label math, the job."""
