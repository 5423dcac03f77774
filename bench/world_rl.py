"""RL with the PRM, in the world where the truth is known: TRL's GRPOTrainer on the world's policy, three arms
from the same start, prompts, steps and seed, differing only in the reward:

    outcome            1 when the completion's stated answer is the problem's, else 0 (the answer check alone)
    prm_plus_outcome   the PRM's process reward (its lowest step score) + the answer check
    prm_only           the PRM's process reward alone

    make world && flock /tmp/prm-engine.lock .venv/bin/python bench/world.py --work WORLD     # trains WORLD/prm-mc
    .venv/bin/python bench/world_rl.py --prm WORLD/prm-mc/best --work RL

Prints, for the policy before RL and after each arm, held-out accuracy on the world's `test` problems
(greedy, and maj@8 of 8 samples at temperature 0.7, a tie for the most votes counting 1/k to each of its
k answers), each with a bootstrap 95% interval over problems, and each arm's greedy accuracy against the
answer-check arm's on the same problems (a paired bootstrap interval of the difference),
and, from the same 8 samples per problem, the share whose steps are all right by the world's exact
arithmetic (labeler.world.truth) and the share of right answers reached through a wrong step: does the
policy learn to write right steps, or to please the PRM? Per arm, the mean reward per logged step and the
hacked share: of the training samples the PRM judges right (every step's score at or above the threshold
`labeler train` chose on validation and stored with the checkpoint; 0.5 for a PRM without one), the share
whose answer is wrong, over training and in its last quarter. A completion cut by --max-new-tokens (no
end token) is wrong, as in the evaluation, and gets reward 0 in every arm; one the PRM cannot score (no
steps, past its length) gets no reward (None: GRPOTrainer leaves it out); both are counted. RL prompts
are the last of the world's held-out `label` split, out of the policy's training like `test`, and apart
from the first 1,000, among which bench/world.py draws the problems its PRM is trained on (its
--policy-problems, 500; it refuses more than RL_PROBLEMS_FROM, 1,000). WORK/rl.json holds everything, with a "summary" of
`problems`, `start`, `outcome`, `prm_plus_outcome`, `prm_only` (each {"accuracy", "ci95", "maj8",
"maj8_ci95"}) and `hacked_share` per arm.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.world.accuracy import generated_answer, stated_answer  # noqa: E402
from labeler.world.cache import HELD_OUT_SPLITS  # noqa: E402
from labeler.world.problems import make_problems  # noqa: E402
from labeler.world.training import POLICY_FOLDER, prompt_text  # noqa: E402
from labeler.world.truth import exact_first_error  # noqa: E402

ARMS = ("outcome", "prm_plus_outcome", "prm_only")
MAX_NEW_TOKENS = 320  # as the world's greedy accuracy reads a solution (--max-new-tokens)


def steps_of(completion: str) -> list[str]:
    return [step.strip() for step in completion.split("\n\n") if step.strip()]


RL_PROBLEMS_FROM = 1000  # the held-out `label` problems before this index are bench/world.py's (its PRM's training)


def bootstrap(values: list[float], seed: int = 0, rounds: int = 1000) -> list[float]:
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(values) for _ in values) / len(values) for _ in range(rounds))
    return [round(means[int(0.025 * rounds)], 4), round(means[int(0.975 * rounds) - 1], 4)]


def evaluate(model_dir: Path, problems, samples: int, seed: int, max_new_tokens: int = MAX_NEW_TOKENS) -> dict:
    """Greedy and maj@`samples` accuracy, and the exact step truth of the samples, on `problems`."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    greedy, majority, all_right, right_through_wrong, right_answers, sampled = [], [], 0, 0, 0, 0
    torch.manual_seed(seed)
    for start in range(0, len(problems), 25):
        batch = problems[start : start + 25]
        encoded = tokenizer([prompt_text(tokenizer, p.text) for p in batch], return_tensors="pt", padding=True, add_special_tokens=False)
        width = encoded["input_ids"].shape[1]
        common = {"max_new_tokens": max_new_tokens, "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
        with torch.no_grad():
            best = model.generate(**encoded, do_sample=False, **common)[:, width:]
            drawn = model.generate(**encoded, do_sample=True, temperature=0.7, top_p=1.0, top_k=0, num_return_sequences=samples, **common)
        drawn = drawn[:, width:]
        for k, problem in enumerate(batch):
            answer = str(problem.answer)
            greedy.append(float(generated_answer(tokenizer, best[k]) == answer))
            answers = []
            for row in drawn[k * samples : (k + 1) * samples]:
                stated = generated_answer(tokenizer, row)
                answers.append(stated)
                text = tokenizer.decode(row, skip_special_tokens=True)
                steps = steps_of(text)
                first_error = exact_first_error(problem, steps) if steps else 0
                sampled += 1
                all_right += first_error < 0 and stated == answer
                if stated == answer:
                    right_answers += 1
                    right_through_wrong += first_error >= 0
            votes = Counter(a for a in answers if a is not None)
            top = max(votes.values(), default=0)
            leaders = [a for a, n in votes.items() if n == top]
            majority.append(1 / len(leaders) if answer in leaders else 0.0)  # a tie: 1/k credit, not the first drawn
    return {
        "accuracy": round(sum(greedy) / len(greedy), 4), "ci95": bootstrap(greedy, seed),
        "maj8": round(sum(majority) / len(majority), 4), "maj8_ci95": bootstrap(majority, seed),
        "samples_all_steps_right": round(all_right / sampled, 4),
        "right_answers_through_a_wrong_step": round(right_through_wrong / right_answers, 4) if right_answers else None,
        "greedy_per_problem": greedy,
    }  # fmt: skip


def paired(arm: list[float], reference: list[float], seed: int = 0) -> dict:
    """The mean difference arm - reference over the same problems, with a bootstrap 95% interval."""
    differences = [a - b for a, b in zip(arm, reference, strict=True)]
    return {"difference": round(sum(differences) / len(differences), 4), "ci95": bootstrap(differences, seed)}


def judged_right_at(prm: str) -> float:
    """The step score at or above which the PRM calls a step right: its checkpoint's stored threshold, else 0.5."""
    from labeler.prm.model import PRMLoadError, read_settings
    from labeler.prm.scorers import CHECKPOINT, checkpoint_folder, parse_spec

    kind, model = parse_spec(prm)
    if kind != CHECKPOINT:
        return 0.5
    try:
        threshold = read_settings(Path(checkpoint_folder(model))).threshold
    except PRMLoadError:
        return 0.5
    return 0.5 if threshold is None else threshold


class ArmReward:
    """GRPOTrainer's reward function for one arm; records, per call, the mean reward and the hacked share."""

    def __init__(self, arm: str, prm: str, eos: int):
        from labeler.rewards import ProcessReward, RewardConfig

        self.arm = arm
        self.__name__ = f"world_{arm}"
        self.reward = ProcessReward(RewardConfig(prm=prm, device="cpu", answer_weight=0.0))
        self.judged_right_at = judged_right_at(prm)
        self.eos = eos
        self.log: list[dict] = []

    def __call__(self, prompts, completions, problem, answer, completion_ids, **kwargs) -> list[float | None]:
        process = [r.value for r in self.reward.rewards(list(problem), list(completions))]  # None: unmeasured
        ended = [self.eos in ids for ids in completion_ids]  # cut by --max-new-tokens: wrong, reward 0, as evaluated
        right = [e and stated_answer(c) == a for e, c, a in zip(ended, completions, answer)]
        if self.arm == "outcome":
            values = [float(r) for r in right]
        elif self.arm == "prm_plus_outcome":
            values = [0.0 if not e else None if p is None else p + float(r) for e, p, r in zip(ended, process, right)]
        else:
            values = [0.0 if not e else p for e, p in zip(ended, process)]
        high = [r for p, r in zip(process, right) if p is not None and p >= self.judged_right_at]
        measured = [v for v in values if v is not None]
        self.log.append({
            "mean_reward": sum(measured) / len(measured) if measured else None, "right": sum(right) / len(right),
            "high": len(high), "high_wrong": sum(not r for r in high), "unmeasured": sum(p is None for p in process),
            "cut": sum(not e for e in ended),
        })  # fmt: skip
        return values


def train_arm(arm: str, args, policy: Path, dataset, out: Path) -> dict:
    from trl import GRPOConfig, GRPOTrainer

    from transformers import AutoTokenizer

    reward = ArmReward(arm, args.prm, AutoTokenizer.from_pretrained(policy).eos_token_id)
    config = GRPOConfig(
        output_dir=str(out), max_steps=args.steps, per_device_train_batch_size=args.prompts * args.generations,
        num_generations=args.generations, max_completion_length=args.max_new_tokens, temperature=0.7, learning_rate=args.learning_rate,
        beta=0.0, seed=args.seed, use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", logging_steps=1,
        save_strategy="no", disable_tqdm=True,
    )  # fmt: skip
    started = time.monotonic()
    trainer = GRPOTrainer(model=str(policy), reward_funcs=reward, args=config, train_dataset=dataset)
    trainer.train()
    trainer.save_model(str(out / "final"))
    trainer.processing_class.save_pretrained(str(out / "final"))
    log = reward.log
    high = sum(entry["high"] for entry in log)
    last = log[len(log) - max(1, len(log) // 4) :]  # the last quarter of the reward calls (one per step here)
    last_high = sum(entry["high"] for entry in last)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "mean_reward_per_step": [None if e["mean_reward"] is None else round(e["mean_reward"], 4) for e in log],
        "right_per_step": [round(e["right"], 4) for e in log],
        "hacked_share": round(sum(e["high_wrong"] for e in log) / high, 4) if high else None,
        "hacked_share_last_quarter": round(sum(e["high_wrong"] for e in last) / last_high, 4) if last_high else None,
        "judged_right_at": reward.judged_right_at,
        "judged_right": high,
        "unmeasured": sum(e["unmeasured"] for e in log),
        "cut": sum(e["cut"] for e in log),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prm", required=True, help="the PRM whose reward the PRM arms use (bench/world.py's WORK/prm-mc/best)")
    parser.add_argument("--policy", default=None, help="the policy to train (default: the world model's policy/)")
    parser.add_argument("--work", required=True, help="a new or empty folder for the runs and rl.json")
    parser.add_argument("--steps", type=int, default=30, help="GRPO steps per arm (default 30)")
    parser.add_argument("--prompts", type=int, default=8, help="problems per step (default 8)")
    parser.add_argument("--generations", type=int, default=8, help="completions per problem (default 8)")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--eval-problems", type=int, default=200, help="held-out test problems (default 200)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS, help=f"tokens a completion may take (default {MAX_NEW_TOKENS})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("steps", "prompts", "generations", "eval_problems", "max_new_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.steps * args.prompts > HELD_OUT_SPLITS["label"] - RL_PROBLEMS_FROM:
        parser.error(f"--steps x --prompts: at most {HELD_OUT_SPLITS['label'] - RL_PROBLEMS_FROM} problems (the held-out label split's last)")
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    if not arms or any(arm not in ARMS for arm in arms):
        parser.error(f"--arms: choose from {', '.join(ARMS)}")
    work = Path(args.work)
    if work.exists() and any(work.iterdir()):
        parser.error(f"--work {work} holds an earlier run: pass a new or empty folder")
    work.mkdir(parents=True, exist_ok=True)
    if args.policy is None:
        from labeler.world.cache import ensure_world_model

        args.policy = str(ensure_world_model() / POLICY_FOLDER)
    policy = Path(args.policy)
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy)
    held_out = make_problems(HELD_OUT_SPLITS["label"], "label", args.seed)
    train_problems = held_out[len(held_out) - args.steps * args.prompts :]
    dataset = Dataset.from_dict({
        "prompt": [prompt_text(tokenizer, p.text) for p in train_problems],
        "problem": [p.text for p in train_problems], "answer": [str(p.answer) for p in train_problems],
    })  # fmt: skip
    test = make_problems(args.eval_problems, "test", args.seed)
    results = {"settings": vars(args) | {"policy": str(policy)}, "arms": {}}
    print(f"policy {policy}, PRM {args.prm}; {len(test)} held-out problems", file=sys.stderr, flush=True)
    started = time.monotonic()
    results["start"] = evaluate(policy, test, 8, args.seed, args.max_new_tokens)
    shown = lambda figures: json.dumps({k: v for k, v in figures.items() if k != "greedy_per_problem"})  # noqa: E731
    print(f"[rl] start: {shown(results['start'])} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    for arm in arms:
        training = train_arm(arm, args, policy, dataset, work / arm)
        print(f"[rl] {arm}: trained in {training['seconds']} s, hacked share {training['hacked_share']}", file=sys.stderr, flush=True)
        results["arms"][arm] = training | {"eval": evaluate(work / arm / "final", test, 8, args.seed, args.max_new_tokens)}
        print(f"[rl] {arm}: {shown(results['arms'][arm]['eval'])}", file=sys.stderr, flush=True)
    keep = ("accuracy", "ci95", "maj8", "maj8_ci95")
    results["summary"] = {"problems": len(test), "start": {k: results["start"][k] for k in keep}}
    results["summary"] |= {arm: {k: results["arms"][arm]["eval"][k] for k in keep} for arm in arms}
    results["summary"]["hacked_share"] = {arm: results["arms"][arm]["hacked_share"] for arm in arms}
    if "outcome" in arms:  # each arm against the answer check alone, on the same problems
        reference = results["arms"]["outcome"]["eval"]["greedy_per_problem"]
        results["paired_vs_outcome"] = {
            arm: paired(results["arms"][arm]["eval"]["greedy_per_problem"], reference, args.seed) for arm in arms if arm != "outcome"
        }
        print(f"[rl] greedy accuracy against the answer check alone: {json.dumps(results['paired_vs_outcome'])}", file=sys.stderr)
    (work / "rl.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results["summary"]))
    print(f"total {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
