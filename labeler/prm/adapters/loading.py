"""Loading a public PRM: what its folder or hub id must hold for the format it is given as, so a
spec of the wrong kind fails at once with the kind to use instead of scoring garbage.

A model's own config is read as plain JSON (no remote code runs to read it). A prm-labeler
checkpoint, a Qwen-style process reward model and a bare backbone all load as causal LMs in
`transformers` without complaint (a tied output layer hides the missing head), so they are told
apart by their folder and the architectures their config names, then by the weights that load.
"""

from __future__ import annotations

import json
import os

from labeler.prm.devices import Placement
from labeler.prm.model import PRM_CONFIG_NAME, PRMLoadError

PROCESS_REWARD_SUFFIX = "ForProcessRewardModel"
CAUSAL_LM_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def raw_config(spec: str, model: str) -> dict:
    """The model's config.json as a dict; PRMLoadError when there is none."""
    if os.path.isdir(model):
        if os.path.isfile(os.path.join(model, PRM_CONFIG_NAME)):
            raise PRMLoadError(f"{spec}: {model} is a prm-labeler checkpoint; pass it without a kind (--prm {model})")
        path = os.path.join(model, "config.json")
        if not os.path.isfile(path):
            raise PRMLoadError(f"{spec}: {model} holds no config.json: not a transformers model folder")
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError) as error:
            raise PRMLoadError(f"{spec}: cannot read {path}: {error}") from error
    from transformers import PretrainedConfig

    try:
        config, _ = PretrainedConfig.get_config_dict(model)
    except (OSError, ValueError) as error:
        raise PRMLoadError(f"{spec}: cannot load model {model}: {str(error).splitlines()[0]}") from error
    return config


def architectures(config: dict) -> list[str]:
    return [name for name in config.get("architectures") or [] if isinstance(name, str)]


def require_causal_lm(spec: str, kind: str, model: str, config: dict) -> None:
    """A causal LM with its output layer, not a process reward model or a bare backbone."""
    names = architectures(config)
    if any(name.endswith(PROCESS_REWARD_SUFFIX) for name in names):
        raise PRMLoadError(f"{spec}: its config names {', '.join(names)}, a PRM with a score head: use qwen-prm:{model}")
    if names and not any(name.endswith(CAUSAL_LM_SUFFIXES) for name in names):
        raise PRMLoadError(
            f"{spec}: its config names {', '.join(names)}, not a causal LM with an output layer; "
            f"{kind} PRMs read the '+' and '-' token probabilities of a causal LM"
        )


def load_tokenizer(spec: str, model: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as error:
        raise PRMLoadError(f"{spec}: cannot load the tokenizer of {model}: {str(error).splitlines()[0]}") from error


def load_causal_lm(spec: str, kind: str, model: str, placement: Placement, trust_remote_code: bool, weights: bool = True):
    """(model, tokenizer) of a causal LM PRM, checked to be one, on the placement's device; with
    weights=False, (None, tokenizer): what another engine (vLLM) needs to render its inputs."""
    from transformers import AutoModelForCausalLM

    require_causal_lm(spec, kind, model, raw_config(spec, model))
    tokenizer = load_tokenizer(spec, model, trust_remote_code)
    if not weights:
        return None, tokenizer
    try:
        lm, info = AutoModelForCausalLM.from_pretrained(
            model, dtype=placement.weight_dtype, trust_remote_code=trust_remote_code, output_loading_info=True
        )
    except (OSError, ValueError, KeyError) as error:
        raise PRMLoadError(f"{spec}: cannot load model {model}: {str(error).splitlines()[0]}") from error
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise PRMLoadError(f"{spec}: the checkpoint lacks weights of a causal LM ({shown}): not a {kind} PRM")
    return lm.to(placement.device).eval(), tokenizer


def model_config(spec: str, model: str, trust_remote_code: bool):
    """The model's transformers config (no weights)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as error:
        raise PRMLoadError(f"{spec}: cannot load the config of {model}: {str(error).splitlines()[0]}") from error


def single_token(spec: str, tokenizer, text: str, what: str) -> int:
    """The id of `text` when the tokenizer writes it as one token; PRMLoadError otherwise."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise PRMLoadError(f"{spec}: the tokenizer writes the {what} {text!r} as {len(ids)} tokens, not one: not a PRM of this format")
    return ids[0]


def context_length(config, tokenizer, max_length: int | None) -> int:
    """Tokens a PRM reads per solution: `max_length` when given, else what the model was built for."""
    if max_length is not None:
        return max_length
    from labeler.prm.model import declared_context

    limits = [declared_context(config), getattr(tokenizer, "model_max_length", None)]
    limits = [limit for limit in limits if isinstance(limit, int) and 0 < limit < 10**7]
    return min(limits) if limits else 4096
