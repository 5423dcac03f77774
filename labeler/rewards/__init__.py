"""A PRM as a reward in reinforcement learning: per-step scores aggregated into one reward per
completion, optionally beside a verifiable answer check (process_reward.py), and the forms RL
trainers call it in: TRL's GRPOTrainer reward functions (trl_grpo.py), verl's compute_score (verl_score.py)."""

from labeler.rewards.config import RewardConfig
from labeler.rewards.process_reward import ProcessReward, Reward

__all__ = ["ProcessReward", "Reward", "RewardConfig"]
