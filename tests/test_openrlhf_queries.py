"""How the reward server finds the response in OpenRLHF's queries (labeler.serving.reward_server.response_of_query):
every form OpenRLHF sends gives the response back, whatever the prompt and response hold; a query built from
another prompt gives none (the server refuses it rather than guess)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.serving.reward_server import CUT_TOKEN_CHARS, PROMPT_TAIL_CHARS, response_of_query

text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>|"), min_size=0, max_size=300)
CHAT_END = "<|im_end|>\n<|im_start|>assistant\n"


@settings(max_examples=300, deadline=None)
@given(question=text, response=text, pads=st.integers(0, 4), cut=st.integers(0, 400))
def test_every_form_openrlhf_sends_gives_the_response_back(question, response, pads, cut):
    prompt = f"<|im_start|>user\n{question}{CHAT_END}"
    assert response_of_query(prompt + response, prompt) == response
    assert response_of_query("<|endoftext|>" * pads + prompt + response + "<|im_end|>", prompt) == response + "<|im_end|>"
    kept = max(len(prompt) - cut, min(len(prompt), PROMPT_TAIL_CHARS))  # cut from the left, never into the last tail
    assert response_of_query(prompt[-kept:] + response, prompt) == response


@settings(max_examples=200, deadline=None)
@given(question=text, response=text)
def test_a_prompt_that_repeats_its_own_end_is_still_split_at_its_end(question, response):
    shot = f"<|im_start|>user\n{question}{CHAT_END}"
    prompt = shot * 3  # few-shot prompts of one template: the tail occurs more than once
    assert response_of_query(prompt[len(shot) // 2 :] + response, prompt) == response


@given(question=text, other=st.text(min_size=CUT_TOKEN_CHARS + 1, max_size=80).filter(lambda t: "<" not in t))
def test_a_query_of_another_prompt_gets_no_response(question, other):
    prompt = f"<|im_start|>user\n{question}{CHAT_END}"
    query = other + prompt[-PROMPT_TAIL_CHARS:] + "2 + 3 = 5."
    if not prompt.endswith(query[: -len("2 + 3 = 5.")][CUT_TOKEN_CHARS:]) and not query.startswith(prompt):
        assert response_of_query(query, prompt) is None
